"""Errors in OpenAI's JSON shape: ``{"error": {"message", "type", "param", "code"}}``.

Every failure the server reports goes through :class:`ApiError`; the engine's own errors
(``AudiocppError``) are mapped to a 4xx by :func:`from_engine_error`, anything else is a 500
whose message names the exception, and the server stays up.
"""

from __future__ import annotations

import re
from typing import Any

from audiocpp.engine.errors import AudiocppError, AudioError, ModelError, UsageError

# OpenAI's error types by status.
_TYPES = {400: "invalid_request_error", 404: "invalid_request_error", 409: "invalid_request_error",
          413: "invalid_request_error", 415: "invalid_request_error", 429: "rate_limit_error",
          503: "server_error", 500: "server_error"}


class ApiError(Exception):
    """An HTTP error with OpenAI's error body."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": _TYPES.get(self.status, "invalid_request_error"),
                          "param": self.param, "code": self.code}}


class Busy(ApiError):
    """The model's queue is full: 429 with ``Retry-After``, at once."""

    def __init__(self, model: str, retry_after: int) -> None:
        super().__init__(429, f"model {model!r} is busy: its queue is full; retry in about {retry_after} s",
                         code="server_busy", headers={"Retry-After": str(retry_after)})


# The engine words its errors for the command line; a client of the API sets request fields, so
# CLI flags become the fields of the request (POST /v1/audio/speech, the WebSocket's session.config,
# Wyoming) and paths on the server's disk are never shown. Applied in order.
_API_WORDING: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), r) for p, r in (
    (r"needs --reference-text, the transcript of --voice-ref",
     "needs the transcript of the reference audio (the stored voice's transcript, reference_text, or "
     "ref_text with ref_audio)"),
    (r"pass --reference-text '[^']*'", "give the exact words spoken in the reference as reference_text "
     "(or ref_text with ref_audio, or store the voice with its transcript)"),
    (r"`audiocpp codec encode [^`]*`", "POST /v1/audio/voices with the audio and its transcript"),
    (r" \(see `audiocpp options --family [\w.-]+`\)", " (GET /v1/models lists each model's request_options)"),
    (r"`audiocpp families --json`", "the model's languages (GET /v1/models)"),
    (r"pass --text, --text-file or text on stdin", "give the text to speak in input"),
    (r"(?:--request-option|-r) (\w+)=", r"the request field \1="),
    (r"--reference-text", "reference_text"),
    (r"--voice-ref(?: FILE| R)?", "the voice"),
    (r"--voice-prompt(?: FILE)?", "a stored voice"),
    (r"--instruct", "instructions"),
    (r"--language", "language"),
    (r"--seed", "seed"),
    (r"--task clon", "a voice to clone"),
    (r"--task (\w+)", r"task \1"),
    (r"--text", "input"),
    # an absolute path in quotes (a temporary upload, a stored voice's files): never shown
    (r"'/[^'\n]*'", "(a file on the server)"),
))


def api_wording(text: str | None) -> str | None:
    """``text`` (an engine message or hint) in the API's terms: request fields, no server paths."""
    if text is None:
        return None
    for pattern, replacement in _API_WORDING:
        text = pattern.sub(replacement, text)
    return text


def engine_message(error: AudiocppError) -> str:
    """An engine error's message and hint as a client of the API reads them."""
    message, hint = api_wording(error.message) or "", api_wording(error.hint)
    return message if not hint else f"{message} (hint: {hint})"


def from_engine_error(error: AudiocppError, *, param: str | None = None) -> ApiError:
    """A user-caused engine error as a 400 (bad option, value, text, reference audio...)."""
    code = "invalid_request"
    for cls, name in ((UsageError, "invalid_value"), (AudioError, "invalid_audio"),
                      (ModelError, "model_error")):
        if isinstance(error, cls):
            code = name
            break
    return ApiError(400, engine_message(error), param=param, code=code)


def internal_error(error: BaseException) -> ApiError:
    return ApiError(500, f"internal error: {type(error).__name__}: {error}", code="internal_error")
