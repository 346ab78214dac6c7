"""``/v1/audio/speech`` through the real ``openai`` client against a real ``audiocpp serve``:
every format, both streaming forms, and the same audio as the CLI for the same request and seed."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.support import cli_ok

from .conftest import FAST, ServerProcess

TEXT = "Hello from the server."
SEED = 11


def _cli(out: Path, *args: str) -> Path:
    cli_ok("--family", "omnivoice", "--text", TEXT, "--seed", str(SEED),
           "-r", f"num_inference_steps={FAST['num_inference_steps']}", "--out", out, *args)
    return out


@pytest.fixture(scope="module")
def cli_wav(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the CLI writes for TEXT, SEED and FAST on the demo model."""
    return _cli(tmp_path_factory.mktemp("cli") / "cli.wav")


def _create(client, **kwargs):
    extra = {"seed": SEED, **FAST, **kwargs.pop("extra_body", {})}
    return client.audio.speech.create(model="omnivoice-demo", voice="alloy", input=TEXT, extra_body=extra,
                                      **kwargs)


def test_wav_bytes_equal_the_cli(client, cli_wav: Path) -> None:
    response = _create(client, response_format="wav")
    assert response.content == cli_wav.read_bytes()
    headers = response.response.headers
    assert headers["content-type"] == "audio/wav"
    assert headers["x-audiocpp-sample-rate"] == "24000"
    assert headers["x-audiocpp-seed"] == str(SEED)
    assert float(headers["x-audiocpp-audio-duration-ms"]) == pytest.approx(sf.info(cli_wav).duration * 1000,
                                                                           abs=0.1)
    assert float(headers["x-audiocpp-wall-ms"]) > 0 and float(headers["x-audiocpp-rtf"]) > 0


def test_flac_and_pcm_decode_to_the_cli_audio(client, cli_wav: Path, tmp_path: Path) -> None:
    cli_flac, rate = sf.read(_cli(tmp_path / "cli.flac"), dtype="int16")
    flac = _create(client, response_format="flac")
    decoded, flac_rate = sf.read(io.BytesIO(flac.content), dtype="int16")
    assert flac.response.headers["content-type"] == "audio/flac"
    assert flac_rate == rate and np.array_equal(decoded, cli_flac)
    expected, _ = sf.read(cli_wav, dtype="int16")
    pcm = _create(client, response_format="pcm")
    assert pcm.content == expected.astype("<i2").tobytes()


def test_openai_names_mean_the_default_model_and_voice(client, cli_wav: Path) -> None:
    response = client.audio.speech.create(model="tts-1", voice="nova", input=TEXT, response_format="wav",
                                          extra_body={"seed": SEED, **FAST})
    assert response.content == cli_wav.read_bytes()


def test_mp3_and_opus_are_written_or_refused_clearly(server: ServerProcess) -> None:
    formats = httpx.get(server.url + "/v1/models").json()["response_formats"]
    for fmt in ("mp3", "opus"):
        r = httpx.post(server.url + "/v1/audio/speech", timeout=120,
                       json={"input": TEXT, "response_format": fmt, "seed": SEED, **FAST})
        if fmt in formats:
            assert r.status_code == 200, r.text
            audio, rate = sf.read(io.BytesIO(r.content), dtype="float32")
            assert rate in (24000, 48000) and len(audio) > 0.5 * rate
        else:
            assert r.status_code == 400 and r.json()["error"]["param"] == "response_format"


def test_streaming_response_pcm_and_wav(client, cli_wav: Path) -> None:
    expected, _ = sf.read(cli_wav, dtype="int16")
    with client.audio.speech.with_streaming_response.create(
        model="omnivoice-demo", voice="alloy", input=TEXT, response_format="pcm", stream_format="audio",
        extra_body={"seed": SEED, **FAST},
    ) as response:
        assert response.headers["content-type"] == "audio/pcm"
        assert response.headers["x-audiocpp-sample-rate"] == "24000"
        data = b"".join(response.iter_bytes())
    assert data == expected.astype("<i2").tobytes()
    with client.audio.speech.with_streaming_response.create(
        model="omnivoice-demo", voice="alloy", input=TEXT, response_format="wav", stream_format="audio",
        extra_body={"seed": SEED, **FAST},
    ) as response:
        data = b"".join(response.iter_bytes())
    assert data[:4] == b"RIFF" and data[36:40] == b"data"
    assert data[44:] == expected.astype("<i2").tobytes()


def test_streaming_sends_each_chunk_as_the_cli_streams_it(client, tmp_path: Path) -> None:
    """Long-form text in streaming mode: several pieces, each equal to the CLI's chunk_N.wav."""
    text = "First part of the text. Second part comes next. And a third one to finish."
    options = {"audio_chunk_threshold": 0.5, "audio_chunk_duration": 0.5}
    cli_ok("--family", "omnivoice", "--text", text, "--seed", str(SEED), "--mode", "streaming",
           "-r", "num_inference_steps=4", *[a for k, v in options.items() for a in ("-r", f"{k}={v}")],
           "--out-dir", tmp_path / "chunks", "--out", tmp_path / "all.wav")
    chunks = sorted((tmp_path / "chunks").glob("chunk_*.wav"), key=lambda p: int(p.stem.split("_")[1]))
    assert len(chunks) >= 2
    expected = b"".join(sf.read(p, dtype="int16")[0].astype("<i2").tobytes() for p in chunks)

    with client.audio.speech.with_streaming_response.create(
        model="omnivoice-demo", voice="default", input=text, response_format="pcm", stream_format="sse",
        extra_body={"seed": SEED, **FAST, **options},
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[len("data: "):]) for line in response.iter_lines()
                  if line.startswith("data: ")]
    deltas = [e for e in events if e["type"] == "speech.audio.delta"]
    assert len(deltas) == len(chunks)
    assert events[-1]["type"] == "speech.audio.done"
    assert events[-1]["timing"]["seed"] == SEED and events[-1]["timing"]["sample_rate"] == 24000
    assert b"".join(base64.b64decode(e["audio"]) for e in deltas) == expected


def test_models_health_and_metrics(server: ServerProcess, client) -> None:
    models = client.models.list()
    [demo] = [m for m in models.data if m.id == "omnivoice-demo"]
    data = demo.model_dump()
    assert data["family"] == "omnivoice" and data["sample_rate"] == 24000
    assert set(data["tasks"]) == {"tts", "clone", "design"} and "streaming" in data["modes"]
    names = {row["name"] for row in data["request_options"]}
    assert {"num_inference_steps", "seed", "speed"} <= names
    health = httpx.get(server.url + "/health").json()
    assert health["status"] == "ok" and health["models"]["omnivoice-demo"]["capacity"] >= 1
    assert server.metric("audiocpp_requests_total") >= 1
    assert server.metric("audiocpp_audio_seconds_total") > 0
    assert server.metric("audiocpp_rtf_count") >= 1
    assert server.metric("process_resident_memory_bytes") > 0


def test_speed_instructions_language_and_options_reach_the_model(server: ServerProcess) -> None:
    base = {"input": TEXT, "seed": SEED, "response_format": "pcm", **FAST}
    plain = httpx.post(server.url + "/v1/audio/speech", json=base, timeout=120).content
    fast = httpx.post(server.url + "/v1/audio/speech", json={**base, "speed": 2.0}, timeout=120).content
    assert len(fast) < len(plain)
    designed = httpx.post(server.url + "/v1/audio/speech", timeout=120,
                          json={**base, "instructions": "female, low pitch", "language": "en"})
    assert designed.status_code == 200 and designed.content != plain
    nested = httpx.post(server.url + "/v1/audio/speech", timeout=120,
                        json={"input": TEXT, "seed": SEED, "response_format": "pcm", "options": FAST})
    assert nested.content == plain


def test_a_rate_the_format_cannot_take_is_refused_before_synthesis(server: ServerProcess, client) -> None:
    """mp3 at 96, 11 or 192 kHz (streamed too) is a 400 naming mp3's rates, before anything is
    synthesized (no audio counted), not a 500 from the encoder after the whole synthesis."""
    import openai

    before = server.metric("audiocpp_audio_seconds_total")
    for rate, stream_format in ((96000, None), (11000, None), (192000, "audio")):
        more = {"stream_format": stream_format} if stream_format else {}
        with pytest.raises(openai.BadRequestError) as info:
            client.audio.speech.create(model="omnivoice-demo", voice="alloy", input="Hi.",
                                       response_format="mp3",
                                       extra_body={"sample_rate": rate, **FAST}, **more)
        error = info.value.body
        assert error["param"] == "sample_rate" and "8000, 11025, 12000" in error["message"], error
    assert server.metric("audiocpp_audio_seconds_total") == before
    mp3 = client.audio.speech.create(model="omnivoice-demo", voice="alloy", input="Hi.",
                                     response_format="mp3",
                                     extra_body={"sample_rate": 22050, "seed": SEED, **FAST})
    assert sf.info(io.BytesIO(mp3.content)).samplerate == 22050


def test_a_stream_reports_the_audio_it_sent(server: ServerProcess, client) -> None:
    """The counters of a stream (speech.audio.done's duration and usage, audiocpp_audio_seconds_total)
    are the audio it sent: its pieces, without the offline file's cross-fades."""
    text, extra = "Stream number 5. It has two sentences.", {"seed": 5, **FAST}
    seconds = 'audiocpp_audio_seconds_total{model="omnivoice-demo"}'
    before = server.metric(seconds)
    with client.audio.speech.with_streaming_response.create(
        model="omnivoice-demo", voice="default", input=text, response_format="pcm", stream_format="sse",
        extra_body=extra,
    ) as response:
        events = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]
    deltas = [base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta"]
    sent = sum(len(d) for d in deltas) / 2 / 24000
    done = events[-1]
    assert len(deltas) >= 2 and done["type"] == "speech.audio.done" and done["format"] == "pcm"
    assert done["timing"]["audio_duration_ms"] == round(sent * 1000, 1), (done, sent)
    assert done["usage"]["output_audio_seconds"] == round(sent, 3)
    assert server.metric(seconds) - before == pytest.approx(sent, abs=1e-5)
    before = server.metric(seconds)
    with client.audio.speech.with_streaming_response.create(
        model="omnivoice-demo", voice="default", input=text, response_format="pcm", stream_format="audio",
        extra_body=extra,
    ) as response:
        data = b"".join(response.iter_bytes())
    assert data == b"".join(deltas)
    assert server.metric(seconds) - before == pytest.approx(len(data) / 2 / 24000, abs=1e-5)


def test_what_openai_and_kokoro_fastapi_clients_ask_for(server: ServerProcess, client) -> None:
    """GET /v1/models/tts-1 (an alias of the first model), Open WebUI's GET {base}/audio/models, aac,
    Kokoro-FastAPI's "stream": true (a streamed response), and SSE of a format its deltas are not."""
    import av
    import openai

    alias = client.models.retrieve("tts-1")
    assert alias.id == "tts-1" and alias.model_dump()["alias_of"] == "omnivoice-demo"
    models = httpx.get(server.url + "/v1/audio/models").json()["models"]
    assert {"omnivoice-demo", "tts-1", "tts-1-hd"} <= {m["id"] for m in models}
    assert all(m["name"] for m in models)

    aac = _create(client, response_format="aac")
    assert aac.response.headers["content-type"] == "audio/aac"
    with av.open(io.BytesIO(aac.content)) as container:
        frames = [f.to_ndarray() for f in container.decode(audio=0)]
        rate = container.streams.audio[0].rate
    wav, wav_rate = sf.read(io.BytesIO(_create(client, response_format="wav").content))
    assert rate == wav_rate and abs(sum(f.shape[-1] for f in frames) - len(wav)) <= 2048  # AAC's priming

    body = {"model": "omnivoice-demo", "input": TEXT, "response_format": "pcm", "seed": SEED, **FAST}
    url = server.url + "/v1/audio/speech"
    with httpx.stream("POST", url, json={**body, "stream": True}, timeout=120) as r:
        assert r.status_code == 200 and "content-length" not in r.headers  # chunked, as it is generated
        streamed = b"".join(r.iter_bytes())
    plain = httpx.post(server.url + "/v1/audio/speech", json={**body, "stream_format": "audio"}, timeout=120)
    assert streamed == plain.content

    with pytest.raises(openai.BadRequestError) as info:
        client.audio.speech.create(model="omnivoice-demo", voice="alloy", input=TEXT, response_format="flac",
                                   stream_format="sse", extra_body=FAST)
    assert info.value.body["param"] == "response_format" and "pcm" in info.value.body["message"]
