"""``WS /v1/audio/speech/stream`` with the ``websockets`` client: an LLM-like reply streamed in small
deltas is spoken sentence by sentence as each completes (the first sentence's audio arrives before
the text ends), in vLLM-Omni's message shapes; a bad config, a bad message (a binary frame too), audio
frames within the client's default message limit, text past the session's limit cut and what is
dropped said, a client that goes away (counted, no traceback in the server's log), and the
back-pressure bound on a client that does not read."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import numpy as np
import pytest
import websockets

from .conftest import ServerProcess

REPLY = ("Sure, I can help with that. The capital of France is Paris, a city on the Seine. "
         "It has been the capital for centuries! Anything else?")


@pytest.fixture()
def ws_server(rates_server: ServerProcess) -> ServerProcess:
    return rates_server


def deltas(text: str, size: int = 3) -> list[str]:
    """An LLM's reply as it is written: a few characters at a time."""
    return [text[i:i + size] for i in range(0, len(text), size)]


async def converse(url: str, config: dict, text: str, *, pause: float = 0.01,
                   hold_at: int | None = None) -> tuple[list, float, float]:
    """(messages received, when input.done was sent, when the first audio frame came). ``hold_at``: the
    text from this character on is written only once the first audio frame has come (or after 60 s, as
    a reply whose last sentence comes slowly: a server that waited for the whole text never speaks)."""
    received: list = []
    first_audio = done_at = float("nan")
    async with websockets.connect(url.replace("http", "ws") + "/v1/audio/speech/stream") as ws:
        await ws.send(json.dumps({"type": "session.config", **config}))

        async def reader() -> None:
            nonlocal first_audio
            async for message in ws:
                if isinstance(message, bytes) and np.isnan(first_audio):
                    first_audio = time.monotonic()
                received.append(message if isinstance(message, bytes) else json.loads(message))

        task = asyncio.ensure_future(reader())
        held = len(text) if hold_at is None else hold_at
        for part in (text[:held], text[held:]):
            for piece in deltas(part):
                await ws.send(json.dumps({"type": "input.text", "text": piece}))
                await asyncio.sleep(pause)
            deadline = time.monotonic() + 60
            while part and hold_at is not None and np.isnan(first_audio) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
        done_at = time.monotonic()
        await ws.send(json.dumps({"type": "input.done"}))
        await asyncio.wait_for(task, timeout=300)
    return received, done_at, first_audio


def test_sentences_are_spoken_as_they_complete(ws_server: ServerProcess) -> None:
    config = {"model": "a8", "voice": "alloy", "seed": 3, "max_new_tokens": 10}
    # the last sentence comes slowly: the first ones' audio must arrive before it is done
    received, done_at, first_audio = asyncio.run(converse(ws_server.url, config, REPLY, pause=0.05,
                                                          hold_at=REPLY.index("Anything else?")))
    events = [m for m in received if isinstance(m, dict)]
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "session.done" and events[-1]["total_sentences"] == 4
    starts = [e for e in events if e["type"] == "audio.start"]
    assert [s["sentence_index"] for s in starts] == [0, 1, 2, 3]
    assert starts[0]["sentence_text"] == "Sure, I can help with that."
    assert all(s["sample_rate"] == 24000 and s["format"] == "pcm" for s in starts)  # OpenAI's pcm rate
    dones = [e for e in events if e["type"] == "audio.done"]
    assert len(dones) == 4 and all(d["timing"]["first_audio_ms"] is not None for d in dones)
    assert first_audio < done_at, "the first sentence's audio came only after the whole text"
    # between a sentence's audio.start and audio.done come only its binary frames
    frames, current = {}, None
    for message in received:
        if isinstance(message, dict) and message["type"] == "audio.start":
            current = message["sentence_index"]
        elif isinstance(message, dict) and message["type"] == "audio.done":
            current = None
        elif isinstance(message, bytes):
            assert current is not None
            frames[current] = frames.get(current, b"") + message
    assert sorted(frames) == [0, 1, 2, 3] and all(len(f) % 2 == 0 and len(f) > 0 for f in frames.values())
    # the first sentence is the POST of it: same seed and voice, the same 24 kHz resampling
    body = {**config, "input": starts[0]["sentence_text"], "response_format": "pcm", "stream_format": "audio"}
    r = httpx.post(ws_server.url + "/v1/audio/speech", json=body, timeout=300)
    assert r.status_code == 200 and r.headers["x-audiocpp-sample-rate"] == "24000", r.text
    assert frames[0] == r.content


def test_wav_format_and_the_native_rate(ws_server: ServerProcess) -> None:
    config = {"model": "a8", "response_format": "wav", "sample_rate": "native", "seed": 1,
              "max_new_tokens": 6}
    received, _, _ = asyncio.run(converse(ws_server.url, config, "One sentence. Two sentences."))
    starts = [m for m in received if isinstance(m, dict) and m["type"] == "audio.start"]
    assert [s["sample_rate"] for s in starts] == [44100, 44100]
    binaries = [m for m in received if isinstance(m, bytes)]
    assert binaries[0][:4] == b"RIFF" and int.from_bytes(binaries[0][24:28], "little") == 44100


def test_a_bad_config_is_an_error_and_the_socket_closes(ws_server: ServerProcess) -> None:
    async def go(config: dict) -> list:
        async with websockets.connect(ws_server.url.replace("http", "ws") + "/v1/audio/speech/stream") as ws:
            await ws.send(json.dumps(config))
            return [json.loads(m) async for m in ws]

    for config, code in (({"type": "session.config", "model": "nope"}, "model_not_found"),
                         ({"type": "session.config", "response_format": "mp3"}, "unsupported_format"),
                         ({"type": "session.config", "num_inference_steps": "many"}, "invalid_value"),
                         ({"type": "input.text", "text": "hi"}, "invalid_value")):
        messages = asyncio.run(go(config))
        assert len(messages) == 1 and messages[0]["type"] == "error" and messages[0]["code"] == code, messages


def test_a_bad_message_is_an_error_and_the_session_goes_on(ws_server: ServerProcess) -> None:
    async def go() -> list:
        out = []
        async with websockets.connect(ws_server.url.replace("http", "ws") + "/v1/audio/speech/stream") as ws:
            await ws.send(json.dumps({"type": "session.config", "model": "omni", "num_inference_steps": 2}))
            await ws.send(json.dumps({"type": "input.whatever"}))
            await ws.send(json.dumps({"type": "input.text", "text": "Still fine."}))
            await ws.send(json.dumps({"type": "input.done"}))
            async for m in ws:
                out.append(m if isinstance(m, bytes) else json.loads(m))
        return out

    messages = asyncio.run(go())
    events = [m for m in messages if isinstance(m, dict)]
    assert events[0]["type"] == "error" and "input.whatever" in events[0]["message"]
    assert events[-1] == {"type": "session.done", "total_sentences": 1}


STREAM_URL = "/v1/audio/speech/stream"


async def _session(url: str, config: dict, *messages: str | bytes, **connect) -> tuple[list, object]:
    """Send ``config`` and ``messages`` (text frames as JSON, bytes as binary frames) on a socket opened
    as the docs' client opens it, and read until the server closes: (messages, close code)."""
    out: list = []
    async with websockets.connect(url.replace("http", "ws") + STREAM_URL, **connect) as ws:
        await ws.send(json.dumps({"type": "session.config", **config}))
        for message in messages:
            await ws.send(message)
        async for m in ws:
            out.append(m if isinstance(m, bytes) else json.loads(m))
    return out, ws.close_code


def test_a_binary_frame_is_an_error_and_the_session_goes_on(ws_server: ServerProcess) -> None:
    messages, code = asyncio.run(_session(
        ws_server.url, {"model": "omni", "num_inference_steps": 2}, b"\x00\x01 not text",
        json.dumps({"type": "input.text", "text": "Still fine."}), json.dumps({"type": "input.done"})))
    events = [m for m in messages if isinstance(m, dict)]
    assert events[0]["type"] == "error" and events[0]["code"] == "invalid_message", events
    assert "JSON text frames" in events[0]["message"]
    assert events[-1] == {"type": "session.done", "total_sentences": 1} and code == 1000

    async def binary_first() -> tuple[list, object]:
        async with websockets.connect(ws_server.url.replace("http", "ws") + STREAM_URL) as ws:
            await ws.send(b"\x00")
            return [json.loads(m) async for m in ws], ws.close_code

    messages, code = asyncio.run(binary_first())
    assert len(messages) == 1 and messages[0]["code"] == "invalid_message" and code == 1000


def test_audio_frames_fit_the_default_client_limit(ws_server: ServerProcess) -> None:
    """One sentence of well over 1 MiB of PCM (192 kHz) reaches the docs' client (websockets' default
    max_size of 1 MiB) in frames of at most 64 KiB, or of max_frame_bytes; the same audio as a POST."""
    config = {"model": "omni", "sample_rate": 192000, "seed": 2, "num_inference_steps": 2}
    text = "This one sentence runs long enough to make well over a megabyte of audio at this sample rate."
    send = (json.dumps({"type": "input.text", "text": text}), json.dumps({"type": "input.done"}))
    messages, _ = asyncio.run(_session(ws_server.url, config, *send))
    frames = [m for m in messages if isinstance(m, bytes)]
    assert sum(map(len, frames)) > 1 << 20 and max(map(len, frames)) <= 64 << 10, [len(f) for f in frames]
    assert messages[-1]["type"] == "session.done"
    small, _ = asyncio.run(_session(ws_server.url, {**config, "max_frame_bytes": 4096}, *send))
    small_frames = [m for m in small if isinstance(m, bytes)]
    assert max(map(len, small_frames)) <= 4096 and b"".join(small_frames) == b"".join(frames)
    body = {**config, "input": text, "response_format": "pcm", "stream_format": "audio"}
    r = httpx.post(ws_server.url + "/v1/audio/speech", json=body, timeout=300)
    assert r.status_code == 200 and r.content == b"".join(frames)
    bad, code = asyncio.run(_session(ws_server.url, {**config, "max_frame_bytes": 10}))
    assert bad[0]["param"] == "max_frame_bytes" and len(bad) == 1 and code == 1000


def test_text_past_the_limit_is_cut_into_pieces_and_the_dropped_text_is_said(server: ServerProcess) -> None:
    """--max-input-chars 500: 2000 characters with no sentence end in one message are spoken up to the
    limit, in pieces of at most 300 characters cut between words; the error says how many characters
    were dropped, and a later message is dropped with the same error, never silently."""
    run_on = "word " * 400
    messages, _ = asyncio.run(_session(
        server.url, {"model": "omnivoice-demo", "num_inference_steps": 1, "seed": 1},
        json.dumps({"type": "input.text", "text": run_on}),
        json.dumps({"type": "input.text", "text": "More words."}), json.dumps({"type": "input.done"})))
    events = [m for m in messages if isinstance(m, dict)]
    errors = [e for e in events if e["type"] == "error"]
    assert [e["code"] for e in errors] == ["input_too_long", "input_too_long"], errors
    assert [e["dropped_characters"] for e in errors] == [1500, 11] and "500" in errors[0]["message"]
    pieces = [e["sentence_text"] for e in events if e["type"] == "audio.start"]
    assert len(pieces) >= 2 and all(len(p) <= 300 for p in pieces), pieces
    assert " ".join(pieces) == " ".join(run_on[:500].split())  # every kept word, once, in order
    assert events[-1] == {"type": "session.done", "total_sentences": len(pieces)}


def test_a_run_of_text_is_cut_as_it_arrives() -> None:
    """Text fed in LLM-sized deltas with no sentence end comes out in pieces before it ends."""
    from audiocpp.server.textstream import MAX_PIECE_CHARS, TextStream

    stream = TextStream(None)  # type: ignore[arg-type] - cutting needs no plan
    text = "and then, after that, one more clause goes on " * 30
    early = [piece for i in range(0, len(text), 7) for piece in stream.feed(text[i:i + 7])]
    pieces = early + stream.finish()
    assert early and all(len(p) <= MAX_PIECE_CHARS for p in pieces)
    assert " ".join(pieces) == " ".join(text.split()) and early[0].endswith(",")


def test_sessions_are_counted_and_a_client_going_away_is_quiet(ws_server: ServerProcess) -> None:
    """A session is a request of audiocpp_requests_total; one whose client times out or drops the
    connection mid-audio is counted as 499 and leaves nothing but (at most) one info line in the
    server's log: no traceback, no asyncio complaint."""
    series = 'audiocpp_requests_total{{endpoint="/v1/audio/speech/stream",model="omni",status="{}"}}'
    done, gone = ws_server.metric(series.format(200)), ws_server.metric(series.format(499))
    url = ws_server.url.replace("http", "ws") + STREAM_URL
    config = json.dumps({"type": "session.config", "model": "omni", "num_inference_steps": 8})
    text = json.dumps({"type": "input.text", "text": "A sentence to be cut short. " * 4})

    async def leave(how: str) -> None:
        async with websockets.connect(url) as ws:
            await ws.send(config)
            await ws.send(text)
            await ws.send(json.dumps({"type": "input.done"}))
            while not isinstance(await ws.recv(), bytes):  # the first audio, then away
                pass
            if how == "abort":
                ws.transport.abort()  # no close frame: the connection just drops
            else:
                try:  # a client that gives up waiting (its own timeout), then closes
                    await asyncio.wait_for(ws.recv(), timeout=0.001)
                except asyncio.TimeoutError:
                    pass

    for how in ("abort", "timeout"):
        asyncio.run(leave(how))
    messages, _ = asyncio.run(_session(ws_server.url, {"model": "omni", "num_inference_steps": 2},
                                       json.dumps({"type": "input.text", "text": "A whole one."}),
                                       json.dumps({"type": "input.done"})))
    assert messages[-1]["type"] == "session.done"
    time.sleep(1.0)  # what a dropped task would log comes when it is collected
    assert ws_server.metric(series.format(200)) == done + 1
    assert ws_server.metric(series.format(499)) == gone + 2
    log = ws_server.log_path.read_text(errors="replace")
    noise = [n for n in ("Traceback", "never retrieved", "Task was destroyed", "WebSocketDisconnect")
             if n in log]
    assert not noise, log[-3000:]


def test_a_client_that_does_not_read_is_cut_off(monkeypatch) -> None:
    """The bound on audio waiting for a slow consumer (unit-level: a send that never completes)."""
    from audiocpp.server import textstream
    from audiocpp.server.errors import ApiError

    async def never(data: bytes) -> None:
        await asyncio.sleep(3600)

    async def go() -> None:
        backlog = iter([False, False, True])
        await textstream._send_watched(never, b"x", lambda: next(backlog))

    with pytest.raises(ApiError, match="not reading"):
        asyncio.run(go())
