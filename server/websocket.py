"""``WS /v1/audio/speech/stream``: text streamed in (an LLM's reply as it is written), audio out
sentence by sentence, in vLLM-Omni's message shapes.

Client -> server (JSON text frames):

- ``{"type": "session.config", "model", "voice", "response_format": "pcm"|"wav", "sample_rate",
  "language", "instructions", "seed", ...request options}``: first, once; checked as the body of
  ``POST /v1/audio/speech`` is (a bad one is an ``error`` event and the socket closes);
- ``{"type": "input.text", "text": "..."}``: a piece of the text (any size);
- ``{"type": "input.done"}``: the end of the text.

Server -> client, per sentence as soon as it is complete: ``{"type": "audio.start",
"sentence_index", "sentence_text", "format", "sample_rate"}``, binary frames (16-bit mono PCM at that
rate; ``wav``: a stream WAV header first), ``{"type": "audio.done", "sentence_index", "timing"}``
(``first_audio_ms``: from the sentence's completion to its first audio frame); ``{"type": "error",
"message", "code", "sentence_index"?}`` for a sentence that failed (the others go on) or a bad message;
at the end ``{"type": "session.done", "total_sentences"}`` and the socket closes.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

from fastapi import WebSocket, WebSocketDisconnect

from audiocpp.engine.errors import AudiocppError

from .encoding import wav_stream_header
from .errors import ApiError, from_engine_error
from .scheduler import Cancelled
from .speech import parse_body, plan_speech, timing
from .textstream import TextStream, speak

if TYPE_CHECKING:
    from .app import ServerState

FORMATS = ("pcm", "wav")


def _error(error: BaseException) -> dict[str, Any]:
    if isinstance(error, AudiocppError):
        error = from_engine_error(error)
    if isinstance(error, ApiError):
        return {"type": "error", "message": error.message, "code": error.code, "param": error.param}
    return {"type": "error", "message": f"internal error: {type(error).__name__}: {error}",
            "code": "server_error"}


def plan_session(state: ServerState, config: dict[str, Any]):
    """The session's plan from its ``session.config`` (a POST body without ``input``)."""
    body = {k: v for k, v in config.items() if k != "type"}
    if "input" in body:
        raise ApiError(400, "session.config takes no input: send the text as input.text messages",
                       param="input", code="invalid_value")
    fmt = body.setdefault("response_format", "pcm")
    if fmt not in FORMATS:
        raise ApiError(400, f"the speech stream sends {' or '.join(FORMATS)}, not {fmt!r}",
                       param="response_format", code="unsupported_format")
    body.pop("stream_format", None)
    plan = plan_speech(parse_body({**body, "input": "-"}), state.models, state.voices, state.max_input_chars)
    return plan


async def speech_stream(websocket: WebSocket, state: ServerState) -> None:
    await websocket.accept()
    texts: asyncio.Queue[tuple[str, float] | None] = asyncio.Queue()
    reader: asyncio.Task | None = None
    try:
        try:
            config = json.loads(await websocket.receive_text())
            if not isinstance(config, dict) or config.get("type") != "session.config":
                raise ApiError(400, "the first message must be {\"type\": \"session.config\", ...}",
                               code="invalid_value")
            plan = plan_session(state, config)
        except (json.JSONDecodeError, ApiError, AudiocppError) as error:
            if isinstance(error, json.JSONDecodeError):
                error = ApiError(400, "messages are JSON text frames", code="invalid_json")
            await websocket.send_json(_error(error))
            await websocket.close()  # the error event says why
            return
        stream = TextStream(plan)
        reader = asyncio.ensure_future(_read(websocket, stream, texts, state.max_input_chars))
        index = 0
        while True:
            item = await texts.get()
            if item is None:
                break
            sentence, completed = item
            await _speak_one(websocket, state, stream, sentence, completed, index)
            index += 1
        await reader
        await websocket.send_json({"type": "session.done", "total_sentences": index})
        await websocket.close()
    except WebSocketDisconnect:
        pass
    finally:
        if reader is not None and not reader.done():
            reader.cancel()


async def _read(websocket: WebSocket, stream: TextStream, texts: asyncio.Queue, max_chars: int) -> None:
    """Client messages -> complete sentences (with the time each was complete), then None."""
    received = 0
    try:
        while True:
            try:
                message = json.loads(await websocket.receive_text())
            except json.JSONDecodeError:
                await websocket.send_json(_error(ApiError(400, "messages are JSON text frames",
                                                          code="invalid_json")))
                continue
            kind = message.get("type") if isinstance(message, dict) else None
            if kind == "input.text":
                text = message.get("text")
                if not isinstance(text, str):
                    await websocket.send_json(_error(ApiError(400, "input.text needs a string field text",
                                                              param="text", code="invalid_value")))
                    continue
                received += len(text)
                if received > max_chars:
                    await websocket.send_json(_error(ApiError(
                        400, f"the text is longer than {max_chars} characters (--max-input-chars)",
                        code="input_too_long")))
                    break
                for sentence in stream.feed(text):
                    await texts.put((sentence, time.perf_counter()))
            elif kind == "input.done":
                break
            else:
                await websocket.send_json(_error(ApiError(
                    400, f"unknown message type {kind!r}; send input.text or input.done",
                    code="invalid_value")))
        for sentence in stream.finish():
            await texts.put((sentence, time.perf_counter()))
    finally:
        await texts.put(None)


async def _speak_one(websocket: WebSocket, state: ServerState, stream: TextStream, sentence: str,
                     completed: float, index: int) -> None:
    plan = stream.plan_for(sentence)
    rate = plan.output_rate
    await websocket.send_json({"type": "audio.start", "sentence_index": index, "sentence_text": sentence,
                               "format": plan.fmt.name, "sample_rate": rate})
    if plan.fmt.name == "wav":
        await websocket.send_bytes(wav_stream_header(rate))
    first: list[float] = []

    async def send(data: bytes) -> None:
        if data:
            if not first:
                first.append(time.perf_counter() - completed)
            await websocket.send_bytes(data)

    try:
        result = await speak(state, plan, send)
    except WebSocketDisconnect:
        raise
    except Cancelled:
        raise WebSocketDisconnect() from None
    except BaseException as error:  # noqa: BLE001 - told to the client; the next sentences go on
        await websocket.send_json({**_error(error), "sentence_index": index})
        return
    stream.spoke(sentence, result)
    done = {"type": "audio.done", "sentence_index": index, "timing": timing(result, rate)}
    done["timing"]["first_audio_ms"] = round(first[0] * 1000, 1) if first else None
    await websocket.send_json(done)
