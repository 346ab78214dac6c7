"""Home Assistant's Wyoming protocol, driven by the ``wyoming`` package's own TCP client against a real
``audiocpp serve --wyoming-port`` (OmniVoice's demo at 24 kHz and the tiny Audio8 at 44.1 kHz, one
stored voice): describe, synthesize, streaming synthesis (the first sentence is spoken before the
text ends), an unknown voice and a full queue as ``error`` events on a connection that stays usable,
and a Wyoming-only server (``--no-http``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.info import Describe, Info
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeVoice,
)

from tests.support import REPO, voice_like_signal

from .conftest import ServerProcess, free_port

AUDIO8 = REPO / "tests" / "data" / "audio8_tts" / "tiny"
SEED = 7
STORY = ["The first sentence is here. ", "Then a second one comes along, ", "and it ends now. ",
         "A third sentence closes the story."]


@pytest.fixture(scope="module")
def wyoming_server(tmp_path_factory: pytest.TempPathFactory,
                   server_cache: dict[str, str]) -> Iterator[ServerProcess]:
    from audiocpp.families.omnivoice import plugin

    port = free_port()
    log = tmp_path_factory.mktemp("wyoming-log") / "serve.log"
    proc = ServerProcess(["--model", f"omni={plugin.demo_model_path()}", "--model", f"a8={AUDIO8}",
                          "--wyoming-port", str(port), "--voices-dir", str(tmp_path_factory.mktemp("voices")),
                          "--max-concurrency", "1", "--max-queue", "0", "--wyoming-seed", str(SEED)], log,
                         env=server_cache)
    proc.wyoming_port = port  # type: ignore[attr-defined]
    ref = tmp_path_factory.mktemp("ref") / "me.wav"
    sf.write(ref, voice_like_signal(4, 24000, 24000), 24000, subtype="FLOAT")
    with open(ref, "rb") as fh:
        r = httpx.post(proc.url + "/v1/audio/voices", data={"name": "me", "transcript": "This is my voice."},
                       files={"file": ("me.wav", fh, "audio/wav")}, timeout=60)
    assert r.status_code == 201, r.text
    yield proc
    proc.stop()


async def _events(client: AsyncTcpClient, until: set[str], timeout: float = 120) -> list:
    out = []
    deadline = time.monotonic() + timeout
    while True:
        event = await asyncio.wait_for(client.read_event(), timeout=max(0.1, deadline - time.monotonic()))
        assert event is not None, "the server closed the connection"
        out.append(event)
        if event.type in until:
            return out


def run(coro):
    return asyncio.run(coro)


def _audio(events: list) -> tuple[list[AudioStart], np.ndarray]:
    starts = [AudioStart.from_event(e) for e in events if AudioStart.is_type(e.type)]
    chunks = [AudioChunk.from_event(e) for e in events if AudioChunk.is_type(e.type)]
    pcm = np.frombuffer(b"".join(c.audio for c in chunks), dtype=np.int16)
    return starts, pcm


def test_describe_lists_a_program_per_model_with_its_voices(wyoming_server: ServerProcess) -> None:
    async def go() -> Info:
        async with AsyncTcpClient("127.0.0.1", wyoming_server.wyoming_port) as client:
            await client.write_event(Describe().event())
            return Info.from_event((await _events(client, {"info"}))[-1])

    info = run(go())
    programs = {p.name: p for p in info.tts}
    assert set(programs) == {"audiocpp-omni", "audiocpp-a8"}
    for name, program in programs.items():
        model = name.removeprefix("audiocpp-")
        assert program.supports_synthesize_streaming and program.installed
        assert {v.name for v in program.voices} == {model, f"{model}/me"}
        assert all(v.languages for v in program.voices)
    assert "en" in programs["audiocpp-a8"].voices[0].languages or programs["audiocpp-a8"].voices[0].languages


def test_synthesize_answers_audio_start_chunks_stop(wyoming_server: ServerProcess) -> None:
    async def go(voice: str) -> list:
        async with AsyncTcpClient("127.0.0.1", wyoming_server.wyoming_port) as client:
            await client.write_event(Synthesize(text="Hello from Wyoming.",
                                                voice=SynthesizeVoice(name=voice)).event())
            return await _events(client, {"audio-stop", "error"})

    for voice, rate in (("omni", 24000), ("a8", 44100), ("a8/me", 44100)):
        events = run(go(voice))
        assert events[-1].type == "audio-stop", events[-1]
        starts, pcm = _audio(events)
        assert len(starts) == 1 and (starts[0].rate, starts[0].width, starts[0].channels) == (rate, 2, 1)
        assert pcm.size > rate * 0.05 and np.abs(pcm).max() > 0


def test_streaming_speaks_the_first_sentence_before_the_text_ends(wyoming_server: ServerProcess) -> None:
    async def go() -> tuple[list, list]:
        async with AsyncTcpClient("127.0.0.1", wyoming_server.wyoming_port) as client:
            await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name="a8")).event())
            for word in STORY[0].split(" "):
                await client.write_event(SynthesizeChunk(text=word + " ").event())
            await client.write_event(SynthesizeChunk(text="Then a").event())
            early = await _events(client, {"audio-stop"})  # the first sentence, with the text unfinished
            for piece in [STORY[1].removeprefix("Then a"), *STORY[2:]]:
                await client.write_event(SynthesizeChunk(text=piece).event())
            await client.write_event(Synthesize(text="".join(STORY),
                                                voice=SynthesizeVoice(name="a8")).event())
            await client.write_event(SynthesizeStop().event())
            return early, await _events(client, {"synthesize-stopped"})

    early, rest = run(go())
    starts, pcm = _audio(early)
    assert len(starts) == 1 and pcm.size > 0
    # the two other sentences; synthesize ignored
    assert sum(1 for e in rest if AudioStart.is_type(e.type)) == 2
    assert sum(1 for e in rest if AudioStop.is_type(e.type)) == 2
    assert SynthesizeStopped.is_type(rest[-1].type)


def _post_pcm(url: str, model: str, text: str, **extra) -> np.ndarray:
    """The same sentence over POST: streamed 16-bit PCM at the model's rate, the Wyoming seed."""
    body = {"model": model, "input": text, "seed": SEED, "response_format": "pcm", "sample_rate": "native",
            "stream_format": "audio", **extra}
    r = httpx.post(url + "/v1/audio/speech", json=body, timeout=300)
    assert r.status_code == 200, r.text
    return np.frombuffer(r.content, dtype=np.int16)


def test_a_sentence_over_wyoming_is_the_post_of_it(wyoming_server: ServerProcess) -> None:
    """--wyoming-seed: Wyoming's audio equals the POST of the same text with that seed and voice,
    for synthesize and for the first sentence of a streaming synthesis."""
    async def go() -> tuple[list, list]:
        async with AsyncTcpClient("127.0.0.1", wyoming_server.wyoming_port) as client:
            hello = Synthesize(text="Hello from Wyoming.", voice=SynthesizeVoice(name="a8/me"))
            await client.write_event(hello.event())
            whole = await _events(client, {"audio-stop", "error"})
            await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name="omni")).event())
            await client.write_event(SynthesizeChunk(text=STORY[0] + "Then a").event())
            first = await _events(client, {"audio-stop", "error"})
            await client.write_event(SynthesizeStop().event())
            await _events(client, {"synthesize-stopped", "error"})
            return whole, first

    whole, first = run(go())
    post = _post_pcm(wyoming_server.url, "a8", "Hello from Wyoming.", voice="me")
    assert np.array_equal(_audio(whole)[1], post)
    assert np.array_equal(_audio(first)[1], _post_pcm(wyoming_server.url, "omni", STORY[0].strip()))


def test_an_unknown_voice_is_an_error_and_the_connection_stays(wyoming_server: ServerProcess) -> None:
    async def go() -> tuple[Error, Info]:
        async with AsyncTcpClient("127.0.0.1", wyoming_server.wyoming_port) as client:
            await client.write_event(Synthesize(text="Hi.", voice=SynthesizeVoice(name="nobody")).event())
            error = Error.from_event((await _events(client, {"error"}))[-1])
            await client.write_event(Describe().event())
            return error, Info.from_event((await _events(client, {"info"}))[-1])

    error, info = run(go())
    assert "nobody" in error.text and error.code == "voice_not_found"
    assert info.tts


def test_a_full_queue_is_an_error_at_once(wyoming_server: ServerProcess) -> None:
    """--max-concurrency 1 --max-queue 0: while one request runs, the next is refused at once."""
    async def go() -> tuple[float, list]:
        async with httpx.AsyncClient(timeout=300) as http:
            long = asyncio.ensure_future(http.post(wyoming_server.url + "/v1/audio/speech", json={
                "model": "omni", "input": "A long one. " * 6, "num_inference_steps": 64,
                "audio_chunk_threshold": 0.2, "audio_chunk_duration": 0.2}))
            for _ in range(200):
                health = (await http.get(wyoming_server.url + "/health")).json()["models"]["omni"]
                if health["synthesizing"] or health["queued"]:
                    break
                await asyncio.sleep(0.02)
            async with AsyncTcpClient("127.0.0.1", wyoming_server.wyoming_port) as client:
                t0 = time.monotonic()
                await client.write_event(Synthesize(text="Hi.", voice=SynthesizeVoice(name="omni")).event())
                events = await _events(client, {"error", "audio-stop"})
                elapsed = time.monotonic() - t0
            await long
            return elapsed, events

    elapsed, events = run(go())
    assert Error.is_type(events[-1].type), events
    assert Error.from_event(events[-1]).code == "server_busy" and elapsed < 2


def test_a_wyoming_only_server(tmp_path: Path, server_cache: dict[str, str]) -> None:
    import subprocess
    import sys

    from audiocpp.families.omnivoice import plugin

    port = free_port()
    cli = Path(sys.executable).parent / "audiocpp"
    proc = subprocess.Popen([str(cli), "serve", "--no-http", "--wyoming-port", str(port), "--model",
                             f"demo={plugin.demo_model_path()}", "--voices-dir", str(tmp_path / "voices")],
                            stderr=subprocess.PIPE, env={**__import__("os").environ, **server_cache})

    async def go() -> list:
        for _ in range(600):
            try:
                async with AsyncTcpClient("127.0.0.1", port) as client:
                    await client.write_event(Synthesize(text="Only Wyoming here.").event())
                    events = await _events(client, {"audio-stop", "error"})
                    # one model: its voice is "default", and the model's own name is taken too
                    by_name = Synthesize(text="By name.", voice=SynthesizeVoice(name="demo"))
                    await client.write_event(by_name.event())
                    return events + await _events(client, {"audio-stop", "error"})
            except OSError:
                await asyncio.sleep(0.1)
        raise AssertionError("the Wyoming-only server did not start")

    try:
        events = run(go())
        assert [e.type for e in events if e.type in ("audio-stop", "error")] == ["audio-stop", "audio-stop"]
        starts, pcm = _audio(events)
        assert len(starts) == 2 and starts[0].rate == 24000 and pcm.size > 0
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) in (0, -15)
