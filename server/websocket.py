"""``WS /v1/audio/speech/stream``: text streamed in (an LLM's reply as it is written), audio out
sentence by sentence, in vLLM-Omni's message shapes.

Client -> server (JSON text frames):

- ``{"type": "session.config", "model", "voice", "response_format": "pcm"|"wav", "sample_rate",
  "language", "instructions", "seed", "max_frame_bytes", "timestamps", ...request options}``: first, once;
  checked as the body of ``POST /v1/audio/speech`` is (a bad one is an ``error`` event and the socket
  closes); ``timestamps`` (default: on where the model times its words) sends ``audio.word`` events;
- ``{"type": "input.text", "text": "..."}``: a piece of the text (any size);
- ``{"type": "input.done"}``: the end of the text.

Server -> client, per sentence as soon as it is complete: ``{"type": "audio.start",
"sentence_index", "sentence_text", "format", "sample_rate"}``, binary frames (16-bit mono PCM at that
rate, each at most ``max_frame_bytes``, 64 KiB by default, so that a client's default message limit,
websockets' 1 MiB, is never hit; ``wav``: a stream WAV header first), where the model times its words
``{"type": "audio.word", "sentence_index", "word", "start", "end", "phonemes"?}`` for each word just
before the frames of the audio that speaks it (``start``/``end``: seconds from the start of the session's
audio, every sentence's frames back to back as they were sent), ``{"type": "audio.done",
"sentence_index", "timing"}`` (``first_audio_ms``: from the sentence's completion to its first audio
frame); ``{"type": "error", "message", "code", "param", "sentence_index"?}`` for a sentence that failed
(the others go on) or a bad message (a binary frame, bad JSON, an unknown type); at the end
``{"type": "session.done", "total_sentences"}`` and the socket closes.

Text that runs on without a sentence end is cut at clause marks or between words
(``textstream.MAX_PIECE_CHARS``). The session's text is limited to the server's input limit: the
message that passes it is spoken up to the limit (cut between words), and an ``input_too_long`` error
says how many characters were dropped; every later ``input.text`` is answered with the same error.
A client that goes away ends its session quietly (one line at ``--log-level info``).

With keys, the gate has checked the session's key before it starts (``Authorization: Bearer KEY`` or
``?api_key=KEY``); the session uses that key's voices and its share of the queue, each sentence counts
against its audio limit (a sentence over it is an ``error`` with ``code: rate_limit_exceeded`` and
``retry_after``, and is not spoken), and a key removed from the keys file (SIGHUP) ends its open
sessions at their next message (``error`` ``invalid_api_key``, close code 1008).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from fastapi import WebSocket, WebSocketDisconnect

from audiocpp.engine.errors import AudiocppError

from .audit import note
from .auth import ANONYMOUS, Principal
from .encoding import wav_stream_header
from .errors import ApiError, from_engine_error
from .scheduler import Cancelled
from .speech import check_timestamps, json_value, parse_body, plan_speech, timing
from .textstream import TextStream, speak

if TYPE_CHECKING:
    from audiocpp.engine.records import WordTiming

    from .speech import SpeechPlan
    from .state import ServerState

FORMATS = ("pcm", "wav")
ENDPOINT = "/v1/audio/speech/stream"
#: The largest binary frame by default (``max_frame_bytes`` in session.config picks another).
MAX_FRAME_BYTES = 64 << 10
FRAME_BYTES_RANGE = (1024, 16 << 20)
log = logging.getLogger("uvicorn.error")  # uvicorn's own log: shown at --log-level info


class BadMessage(ApiError):
    """A message the session answers with an error event and goes on."""


def _error(error: BaseException) -> dict[str, Any]:
    if isinstance(error, AudiocppError):
        error = from_engine_error(error)
    if isinstance(error, ApiError):
        return {"type": "error", "message": error.message, "code": error.code, "param": error.param}
    return {"type": "error", "message": f"internal error: {type(error).__name__}: {error}",
            "code": "server_error", "param": None}


def plan_session(state: ServerState, config: dict[str, Any],
                 principal: Principal = ANONYMOUS) -> tuple[SpeechPlan, int]:
    """The session's plan from its ``session.config`` (a POST body without ``input``), and its frame size."""
    body = {k: v for k, v in config.items() if k not in ("type", "max_frame_bytes", "timestamps")}
    if "input" in body:
        raise ApiError(400, "session.config takes no input: send the text as input.text messages",
                       param="input", code="invalid_value")
    fmt = body.setdefault("response_format", "pcm")
    if fmt not in FORMATS:
        raise ApiError(400, f"the speech stream sends {' or '.join(FORMATS)}, not {json_value(fmt)}",
                       param="response_format", code="unsupported_format")
    body.pop("stream_format", None)
    body.pop("stream", None)
    frame = config.get("max_frame_bytes", MAX_FRAME_BYTES)
    low, high = FRAME_BYTES_RANGE
    if isinstance(frame, bool) or not isinstance(frame, int) or not low <= frame <= high:
        raise ApiError(400, f"max_frame_bytes must be a whole number of bytes from {low} to {high}, not "
                       f"{json_value(frame)}", param="max_frame_bytes", code="invalid_value")
    plan = plan_speech(parse_body({**body, "input": "-"}), state.models, state.view(principal),
                       state.max_input_chars, principal)
    timestamps = config.get("timestamps")
    if timestamps is not None and not isinstance(timestamps, bool):
        raise ApiError(400, f"timestamps must be true or false, not {json_value(timestamps)}",
                       param="timestamps", code="invalid_value")
    if timestamps:
        check_timestamps(plan.served, "timestamps")
    plan.timestamps = plan.served.times_words if timestamps is None else timestamps
    return plan, frame - frame % 2  # whole 16-bit samples


async def _receive_json(websocket: WebSocket) -> Any:
    """The next message as JSON; a binary frame or bad JSON is a BadMessage; a disconnect raises."""
    message = await websocket.receive()
    if message["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(message.get("code", 1000))
    text = message.get("text")
    if text is None:
        raise BadMessage(400, "binary frames are not accepted from the client: send JSON text frames "
                         "(session.config, input.text, input.done)", code="invalid_message")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise BadMessage(400, "messages are JSON text frames", code="invalid_json") from None


async def speech_stream(websocket: WebSocket, state: ServerState) -> None:
    await websocket.accept()
    texts: asyncio.Queue[tuple[str, float] | None] = asyncio.Queue()
    reader: asyncio.Task | None = None
    model, status, index, offset = "", 200, 0, 0.0
    scope_state = websocket.scope.setdefault("state", {})
    principal: Principal = scope_state.get("principal", ANONYMOUS)
    try:
        try:
            config = await _receive_json(websocket)
            if not isinstance(config, dict) or config.get("type") != "session.config":
                raise ApiError(400, "the first message must be {\"type\": \"session.config\", ...}",
                               code="invalid_value")
            named = config.get("model")
            if isinstance(named, str) and named in state.models:
                model = named
            plan, frame_bytes = await state.plan(lambda: plan_session(state, config, principal))
            model = plan.served.name
            note(scope_state, model=model, voice=plan.voice_name, clone=plan.task.value == "clone", chars=0,
                 audio_s=0.0)
        except (ApiError, AudiocppError) as error:
            status = error.status if isinstance(error, ApiError) else 400
            await websocket.send_json(_error(error))
            await websocket.close()  # the error event says why
            return
        stream = TextStream(plan)
        reader = asyncio.ensure_future(_read(websocket, stream, texts, state.max_input_chars,
                                             lambda: _revoked(state, principal)))
        while True:
            item = await texts.get()
            if item is None:
                break
            sentence, completed = item
            if _revoked(state, principal):
                status = 401
                break
            offset += await _speak_one(websocket, state, stream, sentence, completed, index, frame_bytes,
                                       offset)
            index += 1
        await reader
        if _revoked(state, principal):
            status = 401
            await websocket.send_json(_revoked_error())
            await websocket.close(code=1008)
            return
        await websocket.send_json({"type": "session.done", "total_sentences": index})
        await websocket.close()
    except (WebSocketDisconnect, Cancelled, OSError, RuntimeError) as error:
        # The client went away (a closed socket raises WebSocketDisconnect, or RuntimeError / OSError
        # from a send after the close): normal, not a failure of the server.
        if isinstance(error, RuntimeError) and not _gone(websocket):
            raise
        status = 499
        log.info("speech stream: the client went away after %d sentence(s) (%s)", index,
                 type(error).__name__)
    finally:
        if reader is not None:
            if not reader.done():
                reader.cancel()
            try:
                await reader
            except BaseException:  # noqa: BLE001 - its outcome is the client's disconnect, already handled
                pass
        state.metrics.count_request(ENDPOINT, model, status)
        note(scope_state, status=status, sentences=index)


def _revoked(state: ServerState, principal: Principal) -> bool:
    """Whether the session's key was removed from the keys file since the session started."""
    return state.keys is not None and state.keys.enabled and not state.keys.still_valid(principal)


def _revoked_error() -> dict[str, Any]:
    return {"type": "error", "code": "invalid_api_key", "param": None,
            "message": "the API key of this session is no longer valid on this server: the session ends"}


async def _read(websocket: WebSocket, stream: TextStream, texts: asyncio.Queue, max_chars: int,
                revoked: Any = lambda: False) -> None:
    """Client messages -> complete sentences (with the time each was complete), then None; stops at the
    first message after the session's key was removed."""
    received = 0
    full = False  # the session's text limit was reached: later text is dropped, and said so
    try:
        while True:
            try:
                message = await _receive_json(websocket)
            except BadMessage as error:
                await websocket.send_json(_error(error))
                continue
            if revoked():
                break
            kind = message.get("type") if isinstance(message, dict) else None
            if kind == "input.text":
                text = message.get("text")
                if not isinstance(text, str):
                    await websocket.send_json(_error(ApiError(400, "input.text needs a string field text",
                                                              param="text", code="invalid_value")))
                    continue
                if full:
                    await websocket.send_json(_too_long(max_chars, len(text), later=True))
                    continue
                if received + len(text) > max_chars:
                    full = True
                    kept = _fit_limit(text, max_chars - received)
                    await websocket.send_json(_too_long(max_chars, len(text) - len(kept), later=False))
                    text = kept
                received += len(text)
                for sentence in stream.feed(text):
                    await texts.put((sentence, time.perf_counter()))
            elif kind == "input.done":
                break
            else:
                await websocket.send_json(_error(ApiError(
                    400, f"unknown message type {json_value(kind)}; send input.text or input.done",
                    code="invalid_value")))
        for sentence in stream.finish():
            await texts.put((sentence, time.perf_counter()))
    finally:
        await texts.put(None)


def note_text(scope_state: dict[str, Any], sentence: str) -> None:
    """The sentence in the session's audit record (characters; the text only goes out with --log-text)."""
    audit = scope_state.setdefault("audit", {})
    audit["chars"] = audit.get("chars", 0) + len(sentence)
    audit["text"] = sentence if audit.get("text") is None else audit["text"] + " " + sentence


def _gone(websocket: WebSocket) -> bool:
    """Whether the socket is closed (by the client, or after our close)."""
    from starlette.websockets import WebSocketState

    return (websocket.client_state is not WebSocketState.CONNECTED
            or websocket.application_state is not WebSocketState.CONNECTED)


def _fit_limit(text: str, room: int) -> str:
    """The start of ``text`` that fits in ``room`` characters, cut between words where there is a space."""
    if room <= 0:
        return ""
    head = text[:room]
    if len(text) > room and not text[room].isspace() and " " in head:
        head = head[:head.rindex(" ") + 1]
    return head


def _too_long(max_chars: int, dropped: int, *, later: bool) -> dict[str, Any]:
    what = ("this input.text is dropped" if later else
            f"the last {dropped} characters of this input.text are dropped; the text before them is spoken")
    return {"type": "error", "code": "input_too_long", "param": "text", "dropped_characters": dropped,
            "message": f"the session's text is limited to {max_chars} characters on this server: {what} "
                       "(start a new session for more text)"}


async def _speak_one(websocket: WebSocket, state: ServerState, stream: TextStream, sentence: str,
                     completed: float, index: int, frame_bytes: int, offset: float) -> float:
    """Speak one sentence (its events and frames); the seconds of audio sent. ``offset``: the seconds the
    session sent before it (where its words' times start)."""
    plan = stream.plan_for(sentence)
    over = state.limits.check_audio(plan.principal)
    if over is not None:  # this sentence is not spoken; the session goes on (the limit may reset)
        await websocket.send_json({**_error(over), "sentence_index": index, "retry_after": over.retry_after})
        return 0.0
    scope_state = websocket.scope.setdefault("state", {})
    plan.account = state.account(plan, scope_state)
    note_text(scope_state, sentence)
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
            for start in range(0, len(data), frame_bytes):
                await websocket.send_bytes(data[start:start + frame_bytes])

    async def words(timed: list[WordTiming]) -> None:
        for word in timed:
            shifted = word.shifted(offset).as_dict()
            await websocket.send_json({"type": "audio.word", "sentence_index": index, **shifted})

    try:
        result, sent = await speak(state, plan, send, words if plan.timestamps else None)
    except (WebSocketDisconnect, Cancelled, OSError):
        raise
    except BaseException as error:  # noqa: BLE001 - told to the client; the next sentences go on
        if isinstance(error, RuntimeError) and _gone(websocket):
            raise  # a send on a socket the client closed
        await websocket.send_json({**_error(error), "sentence_index": index})
        return 0.0
    stream.spoke(sentence, result)
    done = {"type": "audio.done", "sentence_index": index, "timing": timing(result, rate, sent)}
    done["timing"]["first_audio_ms"] = round(first[0] * 1000, 1) if first else None
    await websocket.send_json(done)
    return sent
