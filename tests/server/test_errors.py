"""Bad requests get a 4xx with OpenAI's error body naming the problem; the server stays up."""

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
    ("unknown language", {**OK, "language": "klingon-xx"}, 400, "invalid_value", None, "language"),
    ("bad format", {**OK, "response_format": "aac"}, 400, "unsupported_format", "response_format", "wav"),
    ("bad stream format", {**OK, "stream_format": "video"}, 400, "invalid_value", "stream_format", "audio"),
    ("server file option", {**OK, "reference_audio": "/etc/passwd"}, 400, "invalid_value", "reference_audio",
     "no request option"),
    ("transcript without a voice", {**OK, "reference_text": "words"}, 400, "invalid_value", None,
     "reference"),
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


def test_server_stays_up_after_errors(server: ServerProcess) -> None:
    assert httpx.get(server.url + "/health").json()["status"] == "ok"
    assert server.metric("audiocpp_request_errors_total") >= len(CASES)
    r = httpx.post(server.url + "/v1/audio/speech", json=OK, timeout=120)
    assert r.status_code == 200 and r.content[:4] == b"RIFF"
