"""Kokoro behind ``audiocpp serve``, through real clients: named voices, mixes and OpenAI's names over
``POST /v1/audio/speech`` (the ``openai`` client), word timings as SSE events (``httpx``), Kokoro-FastAPI's
``/dev`` routes, the WebSocket's ``audio.word`` events (``websockets``) and Wyoming's voice list and voice
choice (the ``wyoming`` client).

One server for the module: a tiny random Kokoro checkpoint in hexgrad's layout with three voices
(``af_test``, ``jf_test``, ``jm_test``: two female, one male), a key, Wyoming with a fixed seed. Its audio is
compared with what the engine gives in this process for the same request and seed (16-bit PCM, byte for
byte), and its word timings with the engine's.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import soundfile as sf

from .conftest import ServerProcess, free_port, new_key

VOICES = ("af_test", "jf_test", "jm_test")
#: Phonemes in Kokoro's vocabulary (the requests skip the text front end unless they test it).
ONE = "həlˈO wˈɜɹld."
TWO = "həlˈO wˈɜɹld. ðɪs ɪz ɐ tˈɛst."
#: OpenAI's names on this model by the documented rule (no ``??_<name>`` voice here: by gender, in turn).
MAPPED = {"alloy": "af_test", "coral": "jf_test", "nova": "af_test", "sage": "jf_test", "shimmer": "af_test",
          "marin": "jf_test", "ash": "jm_test", "ballad": "jm_test", "echo": "jm_test", "fable": "jm_test",
          "onyx": "jm_test", "verse": "jm_test", "cedar": "jm_test"}


@pytest.fixture(scope="module")
def kokoro_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tools.kokoro.checkpoint import write_checkpoint

    folder = tmp_path_factory.mktemp("kokoro") / "tiny"
    write_checkpoint(folder, "tiny", voices=VOICES)
    return folder


@pytest.fixture(scope="module")
def kokoro_server(tmp_path_factory: pytest.TempPathFactory, server_cache: dict[str, str],
                  kokoro_dir: Path) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("kokoro-serve")
    wyoming_port = free_port()
    proc = ServerProcess(["--model", f"kokoro={kokoro_dir}", "--voices-dir", str(root / "voices"),
                          "--wyoming-port", str(wyoming_port), "--wyoming-seed", "5"], root / "serve.log",
                         env=server_cache, api_key=new_key(), inject=True)
    proc.wyoming_port = wyoming_port  # type: ignore[attr-defined]
    yield proc
    proc.stop()
    proc.assert_quiet()


@pytest.fixture(scope="module")
def engine(kokoro_dir: Path):
    """The same checkpoint loaded in this process: what the server's audio must equal."""
    import audiocpp.engine as ac

    return ac.load(str(kokoro_dir))


def reference(model, text: str, *, voice: str | None, seed: int, streaming: bool = False,
              **options: Any) -> tuple[bytes, list[dict[str, Any]], Any]:
    """(16-bit PCM, words as dicts, result) of the engine's synthesis of one request."""
    from audiocpp.engine.records import TaskRequest
    from audiocpp.server.encoding import pcm16

    if voice is not None:
        options["voice"] = voice
    request = TaskRequest(text=text, seed=seed, options=options)
    if not streaming:
        result = model.session("tts").run(request)
        return pcm16(result.audio), [w.as_dict() for w in result.words], result
    pcm, words, result = b"", [], None
    for event in model.session("tts", mode="streaming").stream(request):
        if event.is_final:
            result = event.result
        elif event.audio is not None:
            pcm += pcm16(event.audio)
            words += [w.as_dict() for w in event.words]
    return pcm, words, result


def monotonic_within(words: list[dict[str, Any]], seconds: float, start: str = "start",
                     end: str = "end") -> None:
    """Words in order, each within the audio's ``seconds``."""
    assert words
    for before, after in zip(words, words[1:]):
        assert before[start] <= after[start] and before[end] <= after[end], (before, after)
    for w in words:
        assert 0 <= w[start] <= w[end] <= seconds + 1e-3, (w, seconds)


def client(server: ServerProcess):
    from openai import OpenAI

    return OpenAI(base_url=server.url + "/v1", api_key=server.client_key, max_retries=0, timeout=120)


# -- the mapping rule, on the real voice sets --------------------------------------------------------------
def test_openai_names_map_by_one_rule() -> None:
    from audiocpp.families.kokoro.voices import describe_voice
    from audiocpp.server.openai_voices import openai_voice_map

    pypi = [describe_voice(n) for n in ("jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo")]
    assert openai_voice_map(pypi) == {
        "alloy": "jf_alpha", "coral": "jf_gongitsune", "nova": "jf_nezumi", "sage": "jf_tebukuro",
        "shimmer": "jf_alpha", "marin": "jf_gongitsune", **dict.fromkeys(
            ("ash", "ballad", "echo", "fable", "onyx", "verse", "cedar"), "jm_kumo")}
    hexgrad = [describe_voice(n) for n in sorted([  # hexgrad's English voices and four more
        "af_alloy", "af_aoede", "af_bella", "af_heart", "af_jessica", "af_kore", "af_nicole", "af_nova",
        "af_river", "af_sarah", "af_sky", "am_adam", "am_echo", "am_eric", "am_fenrir", "am_liam",
        "am_michael", "am_onyx", "am_puck", "am_santa", "bf_alice", "bf_emma", "bf_isabella", "bf_lily",
        "bm_daniel", "bm_fable", "bm_george", "bm_lewis", "jf_alpha", "jm_kumo", "zf_xiaobei", "zm_yunjian"])]
    assert openai_voice_map(hexgrad) == {
        "alloy": "af_alloy", "echo": "am_echo", "fable": "bm_fable", "nova": "af_nova", "onyx": "am_onyx",
        "coral": "af_aoede", "sage": "af_bella", "shimmer": "af_heart", "marin": "af_jessica",
        "ash": "am_adam", "ballad": "am_eric", "verse": "am_fenrir", "cedar": "am_liam"}
    assert openai_voice_map([]) == {}


def test_the_default_model_is_served_as_its_family() -> None:
    from types import SimpleNamespace

    from audiocpp.server.served_models import default_name

    def plan(family: str, speaks: bool) -> SimpleNamespace:
        return SimpleNamespace(demo=True, family=family, plugin=SimpleNamespace(demo_speaks=speaks))

    assert default_name(plan("kokoro", True), None) == "kokoro"
    assert default_name(plan("omnivoice", False), None) == "omnivoice-demo"


# -- POST /v1/audio/speech ---------------------------------------------------------------------------------
def test_voices_are_listed_with_languages(kokoro_server: ServerProcess) -> None:
    voices = httpx.get(kokoro_server.url + "/v1/audio/voices", timeout=30).json()
    named = {v["id"]: v for v in voices["voices"] if v.get("type") == "named"}
    assert set(named) == set(VOICES)
    assert named["jm_test"]["language"] == "ja" and named["jm_test"]["gender"] == "male"
    assert named["af_test"]["language"] == "en-us" and named["af_test"]["models"] == ["kokoro"]
    assert voices["aliases"] == MAPPED
    legacy = httpx.get(kokoro_server.url + "/v1/audio/voices?legacy=true", timeout=30).json()
    assert legacy == {"voices": ["default", *VOICES]}  # Kokoro-FastAPI's old shape: names
    model = httpx.get(kokoro_server.url + "/v1/models/kokoro", timeout=30).json()
    assert model["voices"] == list(VOICES) and model["openai_voices"] == MAPPED
    assert model["word_timestamps"] is True
    assert model["default_voices"]["en"] == "af_test" and model["default_voices"]["ja"] == "jf_test"


def test_named_voices_mixes_and_openai_names(kokoro_server: ServerProcess, engine) -> None:
    api = client(kokoro_server)

    def speak(voice: str) -> bytes:
        return api.audio.speech.create(model="kokoro", voice=voice, input=ONE, response_format="pcm",
                                       extra_body={"seed": 7, "phonemes": True}).content

    assert speak("coral") == reference(engine, ONE, voice="jf_test", seed=7, phonemes=True)[0]
    mixed = speak("jf_test(2)+onyx(1)")  # OpenAI's names are terms of a mix too
    assert mixed == reference(engine, ONE, voice="jf_test(2)+jm_test(1)", seed=7, phonemes=True)[0]


def test_unknown_voices_list_the_models_voices(kokoro_server: ServerProcess) -> None:
    import openai

    api = client(kokoro_server)
    for voice, named in (("jf_tset", "'jf_tset'"), ("af_test+jx_test", "'jx_test'")):
        with pytest.raises(openai.BadRequestError) as caught:
            api.audio.speech.create(model="kokoro", voice=voice, input=ONE, extra_body={"phonemes": True})
        error = caught.value.body
        assert error["param"] == "voice" and error["code"] == "voice_not_found", error
        assert named in error["message"] and "af_test, jf_test, jm_test" in error["message"], error
        assert "Did you mean 'jf_test'" in error["message"] or "Did you mean 'jm_test'" in error["message"]
    with pytest.raises(openai.BadRequestError) as caught:  # the family's own check of a mix
        api.audio.speech.create(model="kokoro", voice="af_test(0)+jm_test", input=ONE)
    assert caught.value.body["param"] == "voice" and "positive" in caught.value.body["message"]


def _sse(server: ServerProcess, body: dict[str, Any]) -> list[dict[str, Any]]:
    with httpx.stream("POST", server.url + "/v1/audio/speech", json=body, timeout=120) as response:
        assert response.status_code == 200, response.read()
        return [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]


def test_sse_word_events(kokoro_server: ServerProcess, engine) -> None:
    events = _sse(kokoro_server, {"model": "kokoro", "input": TWO, "voice": "af_test", "seed": 3,
                                  "phonemes": True, "stream_format": "sse", "timestamps": True})
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "speech.audio.done"
    assert set(kinds) == {"speech.audio.timestamps", "speech.audio.delta", "speech.audio.done"}
    # each piece's words come just before its audio: a client that reads only deltas loses nothing
    assert all(kinds[i + 1] == "speech.audio.delta"
               for i, k in enumerate(kinds) if k == "speech.audio.timestamps")
    pcm = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    words = [w for e in events if e["type"] == "speech.audio.timestamps" for w in e["words"]]
    want_pcm, want_words, _ = reference(engine, TWO, voice="af_test", seed=3, streaming=True, phonemes=True)
    assert pcm == want_pcm and words == want_words
    assert [w["word"] for w in words] == TWO.split()
    monotonic_within(words, len(pcm) / 2 / 24000)
    refused = httpx.post(kokoro_server.url + "/v1/audio/speech", json={"input": ONE, "timestamps": True},
                         timeout=30)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "timestamps"


# -- Kokoro-FastAPI's /dev routes ----------------------------------------------------------------------------
def test_captioned_speech_whole(kokoro_server: ServerProcess, engine) -> None:
    answer = httpx.post(kokoro_server.url + "/dev/captioned_speech", timeout=120, json={
        "model": "kokoro", "input": ONE, "voice": "jm_test", "response_format": "wav", "stream": False,
        "seed": 4, "phonemes": True})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body) == {"audio", "audio_format", "timestamps"} and body["audio_format"] == "audio/wav"
    samples, rate = sf.read(io.BytesIO(base64.b64decode(body["audio"])), dtype="int16")
    pcm, words, result = reference(engine, ONE, voice="jm_test", seed=4, phonemes=True)
    assert rate == 24000 and samples.tobytes() == pcm
    # Kokoro's audio: one duration frame of samples per predicted frame
    frames = sum(sum(chunk) for chunk in result.details["pred_dur"])
    assert len(samples) == frames * engine.cfg.samples_per_duration_frame
    assert body["timestamps"] == [{"word": w["word"], "start_time": w["start"], "end_time": w["end"]}
                                  for w in words]
    monotonic_within(body["timestamps"], len(samples) / rate, "start_time", "end_time")


def test_captioned_speech_streamed(kokoro_server: ServerProcess, engine) -> None:
    from audiocpp.server.encoding import available

    body = {"input": TWO, "voice": "af_test", "response_format": "pcm", "seed": 3, "phonemes": True}
    with httpx.stream("POST", kokoro_server.url + "/dev/captioned_speech", json=body, timeout=120) as answer:
        assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
        lines = [json.loads(line) for line in answer.iter_lines() if line]
    assert len(lines) >= 2 and all(set(line) == {"audio", "audio_format", "timestamps"} for line in lines)
    pcm = b"".join(base64.b64decode(line["audio"]) for line in lines)
    stamps = [w for line in lines for w in line["timestamps"]]
    want_pcm, want_words, _ = reference(engine, TWO, voice="af_test", seed=3, streaming=True, phonemes=True)
    assert pcm == want_pcm
    assert stamps == [{"word": w["word"], "start_time": w["start"], "end_time": w["end"]} for w in want_words]
    # Kokoro-FastAPI's defaults (stream, mp3): a format that comes whole is one line at the end
    default = httpx.post(kokoro_server.url + "/dev/captioned_speech", timeout=120,
                         json={"input": ONE, "voice": "af_test", "phonemes": True})
    lines = [json.loads(line) for line in default.text.splitlines()]
    media = "audio/mpeg" if available("mp3") else "audio/wav"  # mp3 where this machine writes it
    assert len(lines) == 1 and lines[0]["audio_format"] == media, default.text[:300]
    assert [w["word"] for w in lines[0]["timestamps"]] == ONE.split()


def test_phonemize_then_generate_from_phonemes(kokoro_server: ServerProcess, engine) -> None:
    said = httpx.post(kokoro_server.url + "/dev/phonemize", json={"text": "Hello world"}, timeout=60)
    assert said.status_code == 200, said.text
    found = engine.phonemize("Hello world", "a")
    assert said.json()["phonemes"] == found["phonemes"] and said.json()["tokens"] == found["tokens"]
    spoken = httpx.post(kokoro_server.url + "/dev/generate_from_phonemes", timeout=120,
                        json={"phonemes": said.json()["phonemes"], "voice": "jf_test", "seed": 2})
    assert spoken.status_code == 200 and spoken.headers["content-type"] == "audio/wav", spoken.text
    samples, _ = sf.read(io.BytesIO(spoken.content), dtype="int16")
    want = reference(engine, found["phonemes"], voice="jf_test", seed=2, phonemes=True)[0]
    assert samples.tobytes() == want
    bad = httpx.post(kokoro_server.url + "/dev/phonemize", json={"text": "Hi", "language": "zz"}, timeout=30)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "language"


def test_dev_routes_need_the_key(kokoro_server: ServerProcess) -> None:
    wrong = {"Authorization": "Bearer not-a-key"}
    for route in ("/dev/phonemize", "/dev/captioned_speech", "/dev/generate_from_phonemes", "/dev/nothing"):
        answer = httpx.post(kokoro_server.url + route, json={"text": "Hi"}, headers=wrong, timeout=30)
        assert answer.status_code == 401, (route, answer.text)


# -- the WebSocket -------------------------------------------------------------------------------------------
def test_websocket_word_events(kokoro_server: ServerProcess, engine) -> None:
    import websockets

    async def converse() -> list[Any]:
        url = kokoro_server.url.replace("http", "ws") + "/v1/audio/speech/stream"
        async with websockets.connect(url) as ws:
            await ws.send(json.dumps({"type": "session.config", "model": "kokoro", "voice": "af_test+jm_test",
                                      "seed": 5, "phonemes": True}))
            for piece in ("həlˈO wˈɜɹld. ", "ðɪs ɪz ɐ tˈɛst."):
                await ws.send(json.dumps({"type": "input.text", "text": piece}))
            await ws.send(json.dumps({"type": "input.done"}))
            return [message if isinstance(message, bytes) else json.loads(message) async for message in ws]

    messages = asyncio.run(converse())
    assert messages[-1] == {"type": "session.done", "total_sentences": 2}
    kinds = ["frame" if isinstance(m, bytes) else m["type"] for m in messages]
    words = [m for m in messages if isinstance(m, dict) and m["type"] == "audio.word"]
    assert [w["word"] for w in words] == TWO.split()
    assert [w["sentence_index"] for w in words] == [0, 0, 1, 1, 1, 1]
    assert kinds.index("audio.word") < kinds.index("frame")  # a word's event comes before its audio
    first = b"".join(m for m, i in zip(messages, _sentence_of(messages)) if isinstance(m, bytes) and i == 0)
    pcm, want, _ = reference(engine, ONE, voice="af_test+jm_test", seed=5, streaming=True, phonemes=True)
    assert first == pcm and [{k: w[k] for k in ("word", "start", "end")} for w in words[:2]] == [
        {k: w[k] for k in ("word", "start", "end")} for w in want]
    total = sum(len(m) for m in messages if isinstance(m, bytes)) / 2 / 24000
    monotonic_within(words, total)
    assert words[2]["start"] >= len(first) / 2 / 24000 - 1e-3  # the session's time: after the first sentence


def _sentence_of(messages: list[Any]) -> list[int]:
    """The sentence each message belongs to (from the audio.start events)."""
    current, out = -1, []
    for m in messages:
        if isinstance(m, dict) and m.get("type") == "audio.start":
            current = m["sentence_index"]
        out.append(current)
    return out


# -- Wyoming -------------------------------------------------------------------------------------------------
def test_wyoming_lists_and_picks_named_voices(kokoro_server: ServerProcess, engine) -> None:
    from wyoming.audio import AudioChunk
    from wyoming.client import AsyncTcpClient
    from wyoming.error import Error
    from wyoming.info import Describe, Info
    from wyoming.tts import Synthesize, SynthesizeVoice

    port = kokoro_server.wyoming_port  # type: ignore[attr-defined]

    async def exchange(event) -> list:
        async with AsyncTcpClient("127.0.0.1", port) as wy:
            await wy.write_event(event)
            out = []
            while (got := await asyncio.wait_for(wy.read_event(), 120)) is not None:
                out.append(got)
                if got.type in ("info", "audio-stop", "error"):
                    return out
            return out

    info = Info.from_event(asyncio.run(exchange(Describe().event()))[-1])
    voices = {v.name: v.languages for v in info.tts[0].voices}
    assert voices["jm_test"] == ["ja"] and voices["af_test"] == ["en-us"] and "default" in voices
    events = asyncio.run(exchange(Synthesize(text="Hello.", voice=SynthesizeVoice(name="jm_test")).event()))
    pcm = b"".join(AudioChunk.from_event(e).audio for e in events if AudioChunk.is_type(e.type))
    assert events[-1].type == "audio-stop"
    assert pcm == reference(engine, "Hello.", voice="jm_test", seed=5, streaming=True)[0]
    mix = SynthesizeVoice(name="af_test+jf_test")
    mixed = asyncio.run(exchange(Synthesize(text="Hi.", voice=mix).event()))
    assert mixed[-1].type == "audio-stop"
    failed = asyncio.run(exchange(Synthesize(text="Hi.", voice=SynthesizeVoice(name="jf_tset")).event()))
    error = Error.from_event(failed[-1])
    assert "af_test, jf_test, jm_test" in error.text and error.code == "voice_not_found"



# -- pauses and SSML -----------------------------------------------------------------------------------------
SSML = "<speak><p>həlˈO wˈɜɹld.</p><p>ðɪs ɪz<break time='300ms'/>ɐ tˈɛst.</p></speak>"


def test_ssml_over_the_openai_route_and_the_websocket(kokoro_server: ServerProcess, engine) -> None:
    """The same SSML request gives the engine's audio byte for byte through ``POST /v1/audio/speech`` (the
    ``openai`` client) and, sent as one streamed text message, through the WebSocket (read whole, not cut
    at its sentence ends)."""
    import websockets

    want, _, result = reference(engine, SSML, voice="af_test", seed=8, phonemes=True)
    assert [p.get("pause_s") for p in result.details["script"]] == [None, 0.8, None, 0.3, None]
    got = client(kokoro_server).audio.speech.create(model="kokoro", voice="af_test", input=SSML,
                                                    response_format="pcm",
                                                    extra_body={"seed": 8, "phonemes": True}).content
    assert got == want

    async def converse() -> list[Any]:
        url = kokoro_server.url.replace("http", "ws") + "/v1/audio/speech/stream"
        async with websockets.connect(url) as ws:
            await ws.send(json.dumps({"type": "session.config", "model": "kokoro", "voice": "af_test",
                                      "seed": 8, "phonemes": True}))
            for piece in (SSML[:40], SSML[40:]):
                await ws.send(json.dumps({"type": "input.text", "text": piece}))
            await ws.send(json.dumps({"type": "input.done"}))
            return [message if isinstance(message, bytes) else json.loads(message) async for message in ws]

    messages = asyncio.run(converse())
    assert messages[-1] == {"type": "session.done", "total_sentences": 1}
    streamed_pcm = b"".join(m for m in messages if isinstance(m, bytes))
    assert streamed_pcm == reference(engine, SSML, voice="af_test", seed=8, streaming=True, phonemes=True)[0]
