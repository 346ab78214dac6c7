"""``WS /v1/audio/speech/stream`` with the ``websockets`` client: an LLM-like reply streamed in small
deltas is spoken sentence by sentence as each completes (the first sentence's audio arrives before
the text ends), in vLLM-Omni's message shapes; a bad config, a bad message, and the back-pressure
bound on a client that does not read."""

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


async def converse(url: str, config: dict, text: str, *, pause: float = 0.01) -> tuple[list, float, float]:
    """(messages received, when input.done was sent, when the first audio frame came)."""
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
        for piece in deltas(text):
            await ws.send(json.dumps({"type": "input.text", "text": piece}))
            await asyncio.sleep(pause)
        done_at = time.monotonic()
        await ws.send(json.dumps({"type": "input.done"}))
        await asyncio.wait_for(task, timeout=300)
    return received, done_at, first_audio


def test_sentences_are_spoken_as_they_complete(ws_server: ServerProcess) -> None:
    config = {"model": "a8", "voice": "alloy", "seed": 3, "max_new_tokens": 10}
    # the last sentence comes slowly: the first ones' audio must arrive before it is done
    received, done_at, first_audio = asyncio.run(converse(ws_server.url, config, REPLY, pause=0.05))
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
