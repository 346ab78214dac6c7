"""OpenAI's PCM rate and inline references, against a family whose native rate is 44.1 kHz.

- ``pcm`` (and SSE deltas) are 24 kHz by default, as OpenAI's, resampled with the engine's resampler
  (equal to resampling the native audio); ``sample_rate`` picks another rate for every format
  (``"native"``: the model's); the headers say the rate;
- ``ref_audio`` (base64 bytes or a data URL) with ``ref_text`` clones like a stored voice; paths, URLs,
  bad base64 and conflicting fields are 4xx with the field named.
"""

from __future__ import annotations

import base64
import io
import json

import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.support import voice_like_signal

from .conftest import ServerProcess

BODY = {"model": "a8", "input": "Rates and references.", "seed": 5, "max_new_tokens": 8}


def post(server: ServerProcess, **fields) -> httpx.Response:
    return httpx.post(server.url + "/v1/audio/speech", json={**BODY, **fields}, timeout=300)


def pcm(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768


def test_pcm_is_24k_by_default_and_the_native_audio_resampled(rates_server: ServerProcess) -> None:
    from audiocpp.engine.audio.resample import resample

    native = post(rates_server, response_format="pcm", sample_rate="native")
    default = post(rates_server, response_format="pcm")
    assert (native.headers["x-audiocpp-sample-rate"] == "44100"
            and default.headers["x-audiocpp-sample-rate"] == "24000")
    expected = resample(pcm(native.content), 44100, 24000)
    got = pcm(default.content)
    assert got.size == expected.size
    # the same audio: resampled before the 16-bit conversion here, after it (and its clipping) there
    cos = float(got @ expected / (np.linalg.norm(got) * np.linalg.norm(expected)))
    assert cos > 0.999, cos


def test_sample_rate_for_every_format_and_streams(rates_server: ServerProcess) -> None:
    wav = post(rates_server, response_format="wav")  # files keep the model's rate unless asked
    assert sf.info(io.BytesIO(wav.content)).samplerate == 44100
    wav16 = post(rates_server, response_format="wav", sample_rate=16000)
    assert (sf.info(io.BytesIO(wav16.content)).samplerate == 16000
            and wav16.headers["x-audiocpp-sample-rate"] == "16000")
    flac = post(rates_server, response_format="flac", sample_rate=22050)
    assert sf.info(io.BytesIO(flac.content)).samplerate == 22050
    streamed = post(rates_server, response_format="pcm", stream_format="audio")
    assert streamed.headers["x-audiocpp-sample-rate"] == "24000"
    whole = post(rates_server, response_format="pcm")
    assert abs(len(streamed.content) - len(whole.content)) <= 4  # streamed resampling = whole resampling
    with httpx.stream("POST", rates_server.url + "/v1/audio/speech", timeout=300,
                      json={**BODY, "stream_format": "sse"}) as r:
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    audio = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    assert abs(len(audio) - len(whole.content)) <= 4 and events[-1]["timing"]["sample_rate"] == 24000


@pytest.mark.parametrize(("value", "code"), [(7999, "invalid_value"), ("fast", "invalid_value")])
def test_a_bad_sample_rate_is_a_400(rates_server: ServerProcess, value, code: str) -> None:
    r = post(rates_server, sample_rate=value)
    assert r.status_code == 400 and r.json()["error"]["param"] == "sample_rate"


def reference_wav() -> bytes:
    buffer = io.BytesIO()
    sf.write(buffer, voice_like_signal(5, 12000, 24000), 24000, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def test_inline_references_clone_like_a_stored_voice(rates_server: ServerProcess) -> None:
    data = reference_wav()
    plain = base64.b64encode(data).decode()
    url = "data:audio/wav;base64," + plain
    a = post(rates_server, ref_audio=plain, ref_text="A short reference.")
    b = post(rates_server, ref_audio=url, ref_text="A short reference.")
    assert a.status_code == 200, a.text
    assert a.content == b.content  # the same request either way
    name = "inline-check"
    r = httpx.post(rates_server.url + "/v1/audio/voices",
                   data={"name": name, "transcript": "A short reference."},
                   files={"file": ("ref.wav", data, "audio/wav")}, timeout=60)
    assert r.status_code == 201, r.text
    stored = post(rates_server, voice=name)
    assert stored.status_code == 200 and stored.content == a.content  # as the same audio stored as a voice
    tts = post(rates_server)
    assert tts.content != a.content


@pytest.mark.parametrize(("fields", "param", "status"), [
    ({"ref_audio": "/etc/passwd", "ref_text": "x"}, "ref_audio", 400),
    ({"ref_audio": "https://example.com/a.wav", "ref_text": "x"}, "ref_audio", 400),
    ({"ref_audio": "file:///tmp/a.wav", "ref_text": "x"}, "ref_audio", 400),
    ({"ref_audio": "not base64 at all!", "ref_text": "x"}, "ref_audio", 400),
    ({"ref_audio": base64.b64encode(b"RIFF nothing").decode(), "ref_text": "x"}, "ref_audio", 400),
    ({"ref_audio": "data:text/plain;base64,aGk=", "ref_text": "x"}, "ref_audio", 400),
    ({"ref_text": "a transcript without its audio"}, "ref_text", 400),
    ({"ref_audio": "UklGRg==", "voice": "someone"}, "voice", 400),
])
def test_bad_inline_references_are_4xx(rates_server: ServerProcess, fields: dict, param: str,
                                       status: int) -> None:
    r = post(rates_server, **fields)
    assert r.status_code == status, r.text
    assert r.json()["error"]["param"] == param


def test_an_inline_reference_needs_a_family_that_clones_and_its_transcript(
        rates_server: ServerProcess) -> None:
    plain = base64.b64encode(reference_wav()).decode()
    r = post(rates_server, ref_audio=plain)  # Audio8 clones only with the reference's transcript
    assert r.status_code == 400 and "transcript" in r.json()["error"]["message"]
