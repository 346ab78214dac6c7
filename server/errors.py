"""Errors in OpenAI's JSON shape: ``{"error": {"message", "type", "param", "code"}}``.

Every failure the server reports goes through :class:`ApiError`; the engine's own errors
(``AudiocppError``) are mapped to a 4xx by :func:`from_engine_error`, anything else is a 500
whose message names the exception, and the server stays up.
"""

from __future__ import annotations

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


def engine_message(error: AudiocppError) -> str:
    return error.message if not error.hint else f"{error.message} (hint: {error.hint})"


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
