"""Bad requests get a 4xx with OpenAI's error body naming the problem in the request's terms (its
field in ``param``, never a CLI flag or a path of the server's disk); the server stays up, and counts
each error with the model the body named."""

from __future__ import annotations

import httpx
import openai
import pytest

from .conftest import ServerProcess

OK = {"input": "Hi.", "num_inference_steps": 2}

CASES = [
    # (what, body, status, code, param, words in the message)
    ("unknown model", {**OK, "model": "nope"}, 404, "model_not_found", "model", "omnivoice-demo"),
    ("unknown voice", {**OK, "voice": "stranger"}, 400, "voice_not_found", "voice", "GET /v1/audio/voices"),
    ("empty input", {**OK, "input": "   "}, 400, "empty_input", "input", "empty"),
    ("missing input", {"model": "omnivoice-demo"}, 400, "invalid_value", "input", "input"),
    ("input not text", {**OK, "input": 12}, 400, "invalid_value", "input", "string"),
    ("input too long", {**OK, "input": "a" * 501}, 400, "input_too_long", "input", "500"),
    ("unknown option", {**OK, "top_q": 1}, 400, "invalid_value", "top_q", "num_inference_steps"),
    ("bad value type", {**OK, "num_inference_steps": "many"}, 400, "invalid_value", "num_inference_steps",
     "not an integer"),
    ("value out of range", {**OK, "num_inference_steps": 100000}, 400, "invalid_value", "num_inference_steps",
     "maximum"),
    ("bad seed", {**OK, "seed": -1}, 400, "invalid_value", "seed", "minimum"),
    ("unknown language", {**OK, "language": "klingon-xx"}, 400, "invalid_value", "language", "klingon-xx"),
    ("bad format", {**OK, "response_format": "aiff"}, 400, "unsupported_format", "response_format", "wav"),
    ("bad stream format", {**OK, "stream_format": "video"}, 400, "invalid_value", "stream_format", "audio"),
    ("server file option", {**OK, "reference_audio": "/etc/passwd"}, 400, "invalid_value", "reference_audio",
     "no request option"),
    ("transcript without a voice", {**OK, "reference_text": "words"}, 400, "invalid_value",
     "reference_text", "stored voice"),
    ("voice not a name", {**OK, "voice": 5}, 400, "invalid_value", "voice", "voice name"),
    ("sample rate not a number", {**OK, "sample_rate": [8000]}, 400, "invalid_value", "sample_rate", "Hz"),
    ("mp3 at 96 kHz", {**OK, "response_format": "mp3", "sample_rate": 96000}, 400, "invalid_value",
     "sample_rate", "mp3 takes sample_rate 8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000"),
    ("mp3 at 11 kHz, streamed",
     {**OK, "response_format": "mp3", "sample_rate": 11000, "stream_format": "audio"}, 400, "invalid_value",
     "sample_rate", "not 11000"),
    ("mp3 at 192 kHz", {**OK, "response_format": "mp3", "sample_rate": 192000}, 400, "invalid_value",
     "sample_rate", "mp3 takes"),
    ("opus at 44.1 kHz", {**OK, "response_format": "opus", "sample_rate": 44100}, 400, "invalid_value",
     "sample_rate", "8000, 12000, 16000, 24000, 48000"),
    ("sse of flac", {**OK, "response_format": "flac", "stream_format": "sse"}, 400, "unsupported_format",
     "response_format", "response_format pcm"),
    ("option twice", {**OK, "options": {"num_inference_steps": 3}}, 400, "invalid_value",
     "num_inference_steps", "twice"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_speech_requests(server: ServerProcess, case) -> None:
    what, body, status, code, param, words = case
    r = httpx.post(server.url + "/v1/audio/speech", json=body, timeout=60)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == code and error["type"] == "invalid_request_error"
    if param is not None:
        assert error["param"] == param
    assert words.lower() in error["message"].lower(), error["message"]
    assert "--" not in error["message"] and "/tmp" not in error["message"], error["message"]  # flag, path
    assert "Traceback" not in server.log()


def test_malformed_bodies(server: ServerProcess) -> None:
    for content, headers in ((b"{not json", {"content-type": "application/json"}),
                             (b"[1, 2]", {"content-type": "application/json"}),
                             (b"\xff\xfe", {"content-type": "application/json"})):
        r = httpx.post(server.url + "/v1/audio/speech", content=content, headers=headers)
        assert r.status_code == 400 and "error" in r.json(), r.text
    big = httpx.post(server.url + "/v1/audio/speech", json={"input": "a" * (2 << 20)})
    assert big.status_code == 413 and big.json()["error"]["code"] == "body_too_large"
    missing = httpx.get(server.url + "/v1/nothing")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert httpx.get(server.url + "/v1/audio/speech").status_code == 405


def test_the_openai_client_sees_the_errors(client) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client.audio.speech.create(model="nope", voice="alloy", input="Hi.")
    assert info.value.body["code"] == "model_not_found"
    with pytest.raises(openai.BadRequestError) as info:
        client.audio.speech.create(model="omnivoice-demo", voice="alloy", input="Hi.", speed=0.01)
    assert info.value.body["param"] == "speed"


def test_errors_are_counted_with_the_model_the_body_named(server: ServerProcess) -> None:
    """A 4xx whose body named a served model (or none: the first) is labelled with it; an unknown one
    is not a model."""
    series = 'audiocpp_requests_total{{endpoint="/v1/audio/speech",model="{}",status="400"}}'
    before = server.metric(series.format("omnivoice-demo"))
    for body in ({**OK, "model": "omnivoice-demo", "input": ""}, {**OK, "voice": 5},
                 {**OK, "model": "tts-1", "language": "klingon-xx"}):
        assert httpx.post(server.url + "/v1/audio/speech", json=body, timeout=60).status_code == 400
    assert server.metric(series.format("omnivoice-demo")) == before + 3
    unknown = 'audiocpp_requests_total{endpoint="/v1/audio/speech",model="",status="404"}'
    before = server.metric(unknown)
    assert httpx.post(server.url + "/v1/audio/speech", json={**OK, "model": "nope"}).status_code == 404
    assert server.metric(unknown) == before + 1


def test_server_stays_up_after_errors(server: ServerProcess) -> None:
    assert httpx.get(server.url + "/health").json()["status"] == "ok"
    assert server.metric("audiocpp_request_errors_total") >= len(CASES)
    r = httpx.post(server.url + "/v1/audio/speech", json=OK, timeout=120)
    assert r.status_code == 200 and r.content[:4] == b"RIFF"
