"""``POST /dev/captioned_speech``: Kokoro-FastAPI's speech with word timestamps, for its clients as they are.

The body is ``POST /v1/audio/speech``'s (``model``, ``input``, ``voice``, ``response_format``, ``speed`` and
our extensions) with Kokoro-FastAPI's fields and defaults: ``stream`` (default true), ``return_timestamps``
(default true: the model must time its words), ``lang_code`` (the language: ``a``, ``j``...),
``volume_multiplier`` (a factor on the samples, default 1), ``normalization_options`` (accepted; the
family's text front end normalizes by its own rules, and ``normalize: false`` is refused: send phonemes
with ``phonemes: true`` instead), ``return_download_link`` (only false: nothing is kept on the server).
``response_format`` defaults to ``mp3`` as Kokoro-FastAPI's does (``wav`` where this machine writes no mp3).

Answers, as Kokoro-FastAPI's:

- ``stream: false``: one JSON object ``{"audio": <base64 of the whole file>, "audio_format": <media type>,
  "timestamps": [{"word", "start_time", "end_time"}, ...]}`` (``timestamps`` null when not asked);
- ``stream: true``: JSON lines (``application/json``, one object a line) of the same shape as the audio is
  generated: each line a piece of the file (``pcm``, or ``wav`` whose first line starts with a header of
  unknown length; the base64-decoded pieces joined are the file) and the words that piece speaks (their
  times from the start of the whole audio); formats that come whole (``mp3``, ``flac``, ``opus``, ``aac``)
  come as one line at the end. A failure after the first line ends the stream with a line
  ``{"error": {...}}`` (OpenAI's error body).
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from .asgi import JobStreamingResponse
from .encoding import available, wav_stream_header
from .errors import ApiError
from .scheduler import Cancelled
from .service import SpeechRun, api_error, job_items, plan_request, run_speech, stream_headers
from .speech import (
    SpeechPlan,
    check_timestamps,
    json_value,
    observe,
    parse_body,
    result_headers,
    sent_seconds,
)
from .state import ServerState

if TYPE_CHECKING:
    from audiocpp.engine.records import WordTiming

#: Kokoro-FastAPI's fields of this route, with their defaults (the rest is a speech body).
DEFAULTS = {"stream": True, "return_timestamps": True, "return_download_link": False, "lang_code": None,
            "volume_multiplier": 1.0, "normalization_options": None, "download_format": None}


def kfa_words(words: list[WordTiming]) -> list[dict[str, Any]]:
    """Word timings in Kokoro-FastAPI's shape: ``{"word", "start_time", "end_time"}`` (seconds)."""
    return [{"word": w.text, "start_time": round(w.start, 3), "end_time": round(w.end, 3)} for w in words]


def _flag(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise ApiError(400, f"{field} must be true or false, not {json_value(value)}", param=field,
                       code="invalid_value")
    return value


def split_body(data: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the speech body, Kokoro-FastAPI's own fields checked) of a captioned request."""
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_request")
    body = dict(data)
    extra = {key: body.pop(key, default) for key, default in DEFAULTS.items()}
    for field in ("stream", "return_timestamps", "return_download_link"):
        _flag(extra[field], field)
    if extra["return_download_link"] or extra["download_format"] is not None:
        field = "return_download_link" if extra["return_download_link"] else "download_format"
        raise ApiError(400, "this server keeps no files for download: the audio is in the response",
                       param=field, code="unsupported_option")
    if "stream_format" in body:
        raise ApiError(400, "captioned speech streams JSON lines with stream: true (stream_format is not "
                       "taken here)", param="stream_format", code="invalid_value")
    lang = extra["lang_code"]
    if lang is not None:
        if not isinstance(lang, str):
            raise ApiError(400, f"lang_code must be a string, not {json_value(lang)}", param="lang_code",
                           code="invalid_value")
        if body.get("language") not in (None, lang):
            raise ApiError(400, "lang_code and language differ: give one", param="lang_code",
                           code="invalid_value")
        body["language"] = lang
    gain = extra["volume_multiplier"]
    if isinstance(gain, bool) or not isinstance(gain, (int, float)) or not 0 <= gain <= 10:
        raise ApiError(400, f"volume_multiplier must be a number from 0 to 10, not {json_value(gain)}",
                       param="volume_multiplier", code="invalid_value")
    norm = extra["normalization_options"]
    if norm is not None and not isinstance(norm, dict):
        raise ApiError(400, "normalization_options must be a JSON object", param="normalization_options",
                       code="invalid_value")
    if norm and norm.get("normalize") is False:
        raise ApiError(400, "this server's text front end always normalizes the text; to speak exactly what "
                       "you give, send phonemes with phonemes: true", param="normalization_options",
                       code="unsupported_option")
    body.setdefault("response_format", "mp3" if available("mp3") else "wav")
    if extra["stream"]:
        body["stream_format"] = "audio"
    return body, extra


def captioned_plan(plan: SpeechPlan, extra: dict[str, Any]) -> SpeechPlan:
    """The plan with the route's own settings: timestamps (checked against the model) and the gain."""
    if extra["return_timestamps"]:
        check_timestamps(plan.served, "return_timestamps")
    plan.timestamps = bool(extra["return_timestamps"])
    plan.gain = float(extra["volume_multiplier"])
    return plan


async def captioned_speech(state: ServerState, request: Request, data: Any) -> Response:
    """``POST /dev/captioned_speech``: plan, synthesize on the model's queue, answer as Kokoro-FastAPI
    does."""
    body, extra = split_body(data)
    plan = captioned_plan(await plan_request(state, request, body, parse_body), extra)
    run = await run_speech(state, request, plan)
    if isinstance(run, Response):
        return run
    disposition = {"Content-Disposition": f"attachment; filename=speech.{plan.fmt.name}"}
    if run.whole:
        observe(state.metrics, plan, run.result)
        headers = {**result_headers(run.result, plan.served, plan.output_rate), **run.job.headers,
                   **disposition}
        content = {"audio": base64.b64encode(run.audio).decode(), "audio_format": plan.fmt.media_type,
                   "timestamps": kfa_words(run.result.words) if plan.timestamps else None}
        if plan.stream_format is None:
            return JSONResponse(content, headers=headers)
        content["timestamps"] = content["timestamps"] or []
        return Response(_line(content), media_type="application/json", headers=headers)
    return _lines_response(state, plan, run, disposition)


def _line(payload: dict[str, Any]) -> bytes:
    return (json.dumps(payload, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def _lines_response(state: ServerState, plan: SpeechPlan, run: SpeechRun,
                    headers: dict[str, str]) -> Response:
    """The pieces as JSON lines, each with the words it speaks (words of a piece without audio wait for
    the next one, as Kokoro-FastAPI's do)."""
    media = plan.fmt.media_type

    async def body() -> AsyncIterator[bytes]:
        head = wav_stream_header(plan.output_rate) if plan.fmt.name == "wav" else b""
        waiting: list[dict[str, Any]] = []
        async for item in job_items(run.job, run.future, run.first):
            words = kfa_words(item[3]) if plan.timestamps and len(item) > 3 else []
            waiting += words
            if not item[1]:
                continue
            yield _line({"audio": base64.b64encode(head + item[1]).decode(), "audio_format": media,
                         "timestamps": waiting})
            head, waiting = b"", []
        try:
            result, _ = run.future.result()
        except BaseException as error:  # noqa: BLE001 - told to the client as a last line
            if not isinstance(error, Cancelled):
                yield _line(api_error(error).body())
            return
        if waiting or head:
            yield _line({"audio": base64.b64encode(head).decode(), "audio_format": media,
                         "timestamps": waiting})
        observe(state.metrics, plan, result, sent_seconds(run.job, plan))

    return JobStreamingResponse(body(), run.job.cancel, media_type="application/json",
                                headers={**stream_headers(plan, run.job), **headers})


__all__ = ["captioned_speech", "kfa_words", "split_body"]
