"""Home Assistant's Wyoming protocol, driven by the ``wyoming`` package's own TCP client against a real
``audiocpp serve --wyoming-port`` (OmniVoice's demo at 24 kHz and the tiny Audio8 at 44.1 kHz, one
stored voice), in Home Assistant's own order: describe (every model's voices in the first program,
which is the only one Home Assistant uses), synthesize, streaming synthesis (the first sentence is
spoken before the text ends), and every error path read by a copy of Home Assistant's reading loops
(they stop only at ``audio-stop``, ``synthesize-stopped`` or a closed connection and ignore ``error``):
each must end the exchange within 10 s with one error that says what failed. Also zeroconf discovery,
the metrics, quiet disconnects and a Wyoming-only server (``--no-http``)."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event
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

from .conftest import NOISE, ServerProcess, free_port, new_key

AUDIO8 = REPO / "tests" / "data" / "audio8_tts" / "tiny"
SEED = 7
STORY = ["The first sentence is here. ", "Then a second one comes along, ", "and it ends now. ",
         "A third sentence closes the story."]
#: Home Assistant gives up on nothing by itself; these tests give it 10 s.
HA_LIMIT_S = 10.0


def _upload(proc: ServerProcess, name: str, path: Path, transcript: str, admin: str) -> None:
    """A shared voice (the admin key's ``shared=true``): what Wyoming, which has no keys, offers."""
    with open(path, "rb") as fh:
        r = httpx.post(proc.url + "/v1/audio/voices", timeout=60,
                       headers={"Authorization": f"Bearer {admin}"},
                       data={"name": name, "transcript": transcript, "shared": "true"},
                       files={"file": ("v.wav", fh, "audio/wav")})
    assert r.status_code == 201, r.text


@pytest.fixture(scope="module")
def wyoming_server(tmp_path_factory: pytest.TempPathFactory,
                   server_cache: dict[str, str]) -> Iterator[ServerProcess]:
    """``--wyoming-host 0.0.0.0``, as the docs say for Home Assistant on another machine: also what
    zeroconf advertises; HTTP on this machine, with a key. A stored voice ``me`` (shared: stored by the
    admin key, as Wyoming, which has no keys, sees only the shared voices), and ``legacy``: a voice without
    a transcript that an earlier version stored (both families here clone only with a transcript, so it is
    not offered)."""
    from audiocpp.families.omnivoice import plugin

    port = free_port()
    admin = new_key()
    log = tmp_path_factory.mktemp("wyoming-log") / "serve.log"
    voices = tmp_path_factory.mktemp("voices")
    proc = ServerProcess(["--model", f"omni={plugin.demo_model_path()}", "--model", f"a8={AUDIO8}",
                          "--wyoming-host", "0.0.0.0", "--wyoming-port", str(port),
                          "--voices-dir", str(voices), "--max-concurrency", "1", "--max-queue", "0",
                          "--wyoming-seed", str(SEED), "--admin-key", admin], log, env=server_cache,
                         api_key=new_key(), inject=True)
    proc.wyoming_port = port  # type: ignore[attr-defined]
    proc.admin = admin  # type: ignore[attr-defined]
    ref = tmp_path_factory.mktemp("ref") / "me.wav"
    sf.write(ref, voice_like_signal(4, 24000, 24000), 24000, subtype="FLOAT")
    _upload(proc, "me", ref, "This is my voice.", admin)
    legacy = voices / "legacy"
    legacy.mkdir()
    (legacy / "prompts").mkdir()
    (legacy / "reference.wav").write_bytes(ref.read_bytes())
    (legacy / "voice.json").write_text(json.dumps({"name": "legacy", "transcript": "", "sample_rate": 24000,
                                                   "duration_s": 1.0, "reference": "reference.wav"}))
    proc.ref = ref  # type: ignore[attr-defined]
    yield proc
    proc.stop()
    proc.assert_quiet()


def run(coro):
    return asyncio.run(coro)


async def _events(client: AsyncTcpClient, until: set[str], timeout: float = 120) -> list:
    out = []
    deadline = time.monotonic() + timeout
    while True:
        event = await asyncio.wait_for(client.read_event(), timeout=max(0.1, deadline - time.monotonic()))
        assert event is not None, "the server closed the connection"
        out.append(event)
        if event.type in until:
            return out


# -- Home Assistant's two reading loops (homeassistant/components/wyoming/tts.py), copied -------------
async def ha_get_tts_audio(port: int, text: str, voice: str | None = None,
                           language: str | None = None) -> tuple[str, list[Event]]:
    """``async_get_tts_audio``: one synthesize, then read until ``audio-stop`` or a closed connection
    (an ``error`` is read past, as Home Assistant does). (how it ended, the events)."""
    events: list[Event] = []
    async with AsyncTcpClient("127.0.0.1", port) as client:
        named = SynthesizeVoice(name=voice, language=language) if voice or language else None
        await client.write_event(Synthesize(text=text, voice=named).event())

        async def read() -> str:
            while True:
                try:
                    event = await client.read_event()
                except OSError:
                    return "closed"
                if event is None:
                    return "closed"
                events.append(event)
                if AudioStop.is_type(event.type):
                    return "audio-stop"

        try:
            how = await asyncio.wait_for(read(), HA_LIMIT_S)
        except asyncio.TimeoutError:
            how = "hung"
    return how, events


Step = str | Callable[[], Awaitable[None]]


async def ha_stream_tts_audio(port: int, steps: list[Step], voice: str | None = None,
                              language: str | None = None,
                              seen: Callable[[Event], object] | None = None) -> tuple[str, list[Event]]:
    """``async_stream_tts_audio``: a background task writes synthesize-start, the chunks (a step may
    also be a coroutine to run between them), the whole text as synthesize and synthesize-stop, while
    the audio is read until ``synthesize-stopped`` or a closed connection (``seen`` watches each event)."""
    events: list[Event] = []
    named = SynthesizeVoice(name=voice, language=language) if voice or language else None
    client = AsyncTcpClient("127.0.0.1", port)
    await client.connect()

    async def write() -> None:
        try:
            await client.write_event(SynthesizeStart(voice=named).event())
            message = ""
            for step in steps:
                if isinstance(step, str):
                    message += step
                    await client.write_event(SynthesizeChunk(text=step).event())
                else:
                    await step()
            await client.write_event(Synthesize(text=message, voice=named).event())
            await client.write_event(SynthesizeStop().event())
        except OSError:  # "Unexpected disconnection from TTS client"
            pass

    async def read() -> str:
        try:
            while event := await client.read_event():
                events.append(event)
                if seen is not None:
                    seen(event)
                if SynthesizeStopped.is_type(event.type):
                    return "synthesize-stopped"
        except OSError:
            pass
        return "closed"

    writer = asyncio.ensure_future(write())
    try:
        how = await asyncio.wait_for(read(), HA_LIMIT_S)
    except asyncio.TimeoutError:
        how = "hung"
    finally:
        await client.disconnect()
        await asyncio.gather(writer, return_exceptions=True)
    return how, events


def _audio(events: list) -> tuple[list[AudioStart], np.ndarray]:
    starts = [AudioStart.from_event(e) for e in events if AudioStart.is_type(e.type)]
    chunks = [AudioChunk.from_event(e) for e in events if AudioChunk.is_type(e.type)]
    pcm = np.frombuffer(b"".join(c.audio for c in chunks), dtype=np.int16)
    return starts, pcm


def _one_error(events: list[Event]) -> Error:
    errors = [Error.from_event(e) for e in events if Error.is_type(e.type)]
    assert len(errors) == 1, [e.type for e in events]
    error = errors[0]
    assert "--" not in error.text and "/tmp" not in error.text, error.text  # fields, not flags or paths
    assert "without synthesize-start" not in error.text, error.text
    return error


# -- describe --------------------------------------------------------------------------------------------
def test_home_assistants_program_offers_every_models_voices(wyoming_server: ServerProcess) -> None:
    """Home Assistant takes the first installed TTS program: it must reach both models and their stored
    voice, each voice listing its model's real languages, the most common first."""
    async def go() -> Info:
        async with AsyncTcpClient("127.0.0.1", wyoming_server.wyoming_port) as client:
            await client.write_event(Describe().event())
            return Info.from_event((await _events(client, {"info"}))[-1])

    info = run(go())
    program = next(tts for tts in info.tts if tts.installed)  # Home Assistant's choice
    assert program.supports_synthesize_streaming
    voices = {v.name: v for v in program.voices}
    assert set(voices) == {"omni", "omni/me", "a8", "a8/me"}  # not "legacy": no model can use it
    for name, voice in voices.items():
        assert voice.installed and voice.languages[0] == "en" and "auto" not in voice.languages, name
    assert len(voices["a8"].languages) == 11 and "zh" in voices["a8"].languages
    assert "(a8)" in voices["a8/me"].description and "me" in voices["a8/me"].description


def test_the_service_is_advertised_over_zeroconf(wyoming_server: ServerProcess) -> None:
    """``_wyoming._tcp`` with the Wyoming port, at an address of this machine, as wyoming-piper does."""
    from zeroconf import IPVersion, ServiceStateChange
    from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo, AsyncZeroconf

    async def go() -> list[tuple[int, list[str]]]:
        zc = AsyncZeroconf(ip_version=IPVersion.V4Only)
        names: list[str] = []

        def seen(zeroconf, service_type: str, name: str, state_change: ServiceStateChange) -> None:
            if state_change is ServiceStateChange.Added:
                names.append(name)

        browser = AsyncServiceBrowser(zc.zeroconf, "_wyoming._tcp.local.", handlers=[seen])
        found = []
        try:
            for _ in range(50):
                await asyncio.sleep(0.1)
                for name in names:
                    info = AsyncServiceInfo("_wyoming._tcp.local.", name)
                    if await info.async_request(zc.zeroconf, 2000):
                        found.append((info.port, info.parsed_addresses()))
                if any(port == wyoming_server.wyoming_port for port, _ in found):
                    break
                names.clear()
        finally:
            await browser.async_cancel()
            await zc.async_close()
        return found

    found = run(go())
    # --wyoming-host beyond this machine: Wyoming has no keys, and the server says so
    assert "warning: Wyoming listens on 0.0.0.0, beyond this machine" in wyoming_server.log()
    ours = [addresses for port, addresses in found if port == wyoming_server.wyoming_port]
    assert ours, f"no _wyoming._tcp service on port {wyoming_server.wyoming_port}: {found}"
    with socket.create_connection((ours[0][0], wyoming_server.wyoming_port), timeout=5):
        pass  # the advertised address reaches the server


# -- synthesis ---------------------------------------------------------------------------------------
def test_synthesize_answers_audio_start_chunks_stop(wyoming_server: ServerProcess) -> None:
    for voice, rate in (("omni", 24000), ("a8", 44100), ("a8/me", 44100)):
        how, events = run(ha_get_tts_audio(wyoming_server.wyoming_port, "Hello from Wyoming.", voice))
        assert how == "audio-stop", events
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
    how, events = run(ha_stream_tts_audio(wyoming_server.wyoming_port, STORY, "omni/me"))
    assert how == "synthesize-stopped" and not any(Error.is_type(e.type) for e in events)
    assert sum(1 for e in events if AudioStop.is_type(e.type)) == 3


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


# -- every error path, read as Home Assistant reads ----------------------------------------------------
SYNTHESIZE_ERRORS = [
    # (what, text, voice, language, error code, words in the message)
    ("unknown voice", "Hi.", "nobody", None, "voice_not_found", "nobody"),
    ("unusable voice", "Hi.", "a8/legacy", None, "voice_not_found", "legacy"),
    ("unknown language", "Hi.", None, "klingon", "invalid_value", "klingon"),
    ("empty text", "   ", "omni", None, "empty_input", "empty"),
]


@pytest.mark.parametrize("case", SYNTHESIZE_ERRORS, ids=[c[0] for c in SYNTHESIZE_ERRORS])
def test_a_failing_synthesize_ends_the_exchange(wyoming_server: ServerProcess, case) -> None:
    """One error saying what failed, then the connection closes: Home Assistant's loop ends at once."""
    _, text, voice, language, code, words = case
    t0 = time.monotonic()
    how, events = run(ha_get_tts_audio(wyoming_server.wyoming_port, text, voice, language))
    assert how == "closed" and time.monotonic() - t0 < HA_LIMIT_S, (how, events)
    error = _one_error(events)
    assert error.code == code and words in error.text, error


STREAM_ERRORS = [
    ("unknown voice", ["Hi there. ", "More."], "nobody", None, "voice_not_found", "nobody"),
    ("unusable voice", ["Hi there. ", "More."], "omni/legacy", None, "voice_not_found", "legacy"),
    ("unknown language", ["Hi there. ", "More."], None, "klingon", "invalid_value", "klingon"),
]


@pytest.mark.parametrize("case", STREAM_ERRORS, ids=[c[0] for c in STREAM_ERRORS])
def test_a_failing_stream_ends_with_synthesize_stopped(wyoming_server: ServerProcess, case) -> None:
    """What failed, once (not a "synthesize-chunk without synthesize-start" per chunk), then
    ``synthesize-stopped``, which Home Assistant's streaming loop waits for."""
    _, steps, voice, language, code, words = case
    how, events = run(ha_stream_tts_audio(wyoming_server.wyoming_port, steps, voice, language))
    assert how == "synthesize-stopped", (how, events)
    error = _one_error(events)
    assert error.code == code and words in error.text, error
    assert not any(AudioStart.is_type(e.type) for e in events)


def test_a_sentence_that_fails_mid_stream_ends_it(wyoming_server: ServerProcess) -> None:
    """The first sentence is spoken; then the voice is deleted and the next sentence fails while a third
    waits: one error, ``synthesize-stopped``, and nothing of the queued sentence."""
    admin = wyoming_server.admin  # type: ignore[attr-defined]
    _upload(wyoming_server, "brief", wyoming_server.ref, "This is my voice.", admin)  # type: ignore[attr-defined]
    spoken = asyncio.Event()

    async def delete_after_the_first_sentence() -> None:
        await asyncio.wait_for(spoken.wait(), 60)
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {admin}"}) as http:  # a shared voice
            assert (await http.delete(wyoming_server.url + "/v1/audio/voices/brief")).status_code == 200

    how, events = run(ha_stream_tts_audio(
        wyoming_server.wyoming_port,
        ["The first one is here. ", delete_after_the_first_sentence,
         "The second one fails. The third one waits. And a fourth"], "a8/brief",
        seen=lambda event: AudioStop.is_type(event.type) and spoken.set()))
    assert how == "synthesize-stopped", (how, events)
    audio_events = [e.type for e in events if e.type in ("audio-start", "audio-stop")]
    assert audio_events == ["audio-start", "audio-stop"]
    error = _one_error(events)
    assert error.code == "invalid_audio", error


def test_a_full_queue_ends_both_kinds_of_exchange_at_once(wyoming_server: ServerProcess) -> None:
    """--max-concurrency 1 --max-queue 0: while one request runs, a synthesize and a stream to the same
    model are refused at once (server_busy), each ending as Home Assistant needs."""
    async def go() -> tuple[float, tuple, tuple]:
        async with httpx.AsyncClient(timeout=300) as http:
            long = asyncio.ensure_future(http.post(wyoming_server.url + "/v1/audio/speech", json={
                "model": "omni", "input": "A long one. " * 6, "num_inference_steps": 64,
                "audio_chunk_threshold": 0.2, "audio_chunk_duration": 0.2}))
            for _ in range(200):
                health = (await http.get(wyoming_server.url + "/health")).json()["models"]["omni"]
                if health["synthesizing"] or health["queued"]:
                    break
                await asyncio.sleep(0.02)
            t0 = time.monotonic()
            whole, streamed = await asyncio.gather(
                ha_get_tts_audio(wyoming_server.wyoming_port, "Hi.", "omni"),
                ha_stream_tts_audio(wyoming_server.wyoming_port, ["One sentence. ", "Two sentences. ",
                                                                  "Three."], "omni"))
            elapsed = time.monotonic() - t0
            await long
            return elapsed, whole, streamed

    elapsed, (how, events), (stream_how, stream_events) = run(go())
    assert how == "closed" and _one_error(events).code == "server_busy", events
    assert stream_how == "synthesize-stopped", stream_events
    assert _one_error(stream_events).code == "server_busy", stream_events
    assert elapsed < 2


def test_one_language_rule_for_http_and_wyoming(wyoming_server: ServerProcess) -> None:
    """A language no model speaks is refused by both, in the same words (Wyoming picks the model that
    speaks a language; none does, so the first one says why); one they speak works in both."""
    r = httpx.post(wyoming_server.url + "/v1/audio/speech", json={"model": "omni", "input": "Hi.",
                                                                  "language": "klingon"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "language"
    how, events = run(ha_get_tts_audio(wyoming_server.wyoming_port, "Hi.", language="klingon"))
    assert how == "closed" and _one_error(events).text == r.json()["error"]["message"]
    r = httpx.post(wyoming_server.url + "/v1/audio/speech", json={"model": "a8", "input": "Hi.",
                                                                  "language": "klingon"})
    assert r.status_code == 400 and "speaks en, zh" in r.json()["error"]["message"]
    r = httpx.post(wyoming_server.url + "/v1/audio/speech", timeout=120,
                   json={"model": "a8", "input": "Hi.", "language": "en", "max_new_tokens": 4})
    assert r.status_code == 200, r.text  # Audio8 takes no language: one it speaks is inferred
    how, events = run(ha_get_tts_audio(wyoming_server.wyoming_port, "Hi.", language="en"))
    assert how == "audio-stop", events


def test_exchanges_are_counted_and_disconnects_are_quiet(wyoming_server: ServerProcess) -> None:
    """Wyoming in audiocpp_requests_total (model and status); a client that hangs up mid-stream is
    counted as 499 and leaves no traceback or asyncio complaint in the server's log."""
    series = 'audiocpp_requests_total{{endpoint="wyoming",model="{}",status="{}"}}'
    counts = [("a8", 200), ("omni", 400), ("omni", 499)]
    before = {key: wyoming_server.metric(series.format(*key)) for key in counts}

    async def hang_up() -> None:
        async with AsyncTcpClient("127.0.0.1", wyoming_server.wyoming_port) as client:
            await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name="omni")).event())
            await client.write_event(SynthesizeChunk(text="A sentence to cut short. " * 3).event())
            await _events(client, {"audio-chunk"})

    run(hang_up())
    assert run(ha_get_tts_audio(wyoming_server.wyoming_port, "Counted.", "a8"))[0] == "audio-stop"
    assert run(ha_get_tts_audio(wyoming_server.wyoming_port, "Hi.", language="klingon"))[0] == "closed"
    time.sleep(0.5)
    for key in counts:
        assert wyoming_server.metric(series.format(*key)) == before[key] + 1, key
    log = wyoming_server.log_path.read_text(errors="replace")
    assert not [n for n in NOISE if n in log], log[-3000:]


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
