"""Per-key limits against a real ``audiocpp serve``: ``--rate-limit`` and ``--audio-limit`` answer 429
with OpenAI's ``rate_limit_exceeded`` body and a ``Retry-After`` that is right (refused a little before
it, let through at it), per key, in the metrics by the key's label; and the model's queue shared out by
key: one key at its share of the queue is refused at once, and another key's request is served before
the flooding key's waiting ones."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from .conftest import Keys, ServerProcess, new_key

#: Audio per key: 0.5 s within 3 s; requests per key: 4 within 3 s.
RATE, AUDIO_PERIOD_S = 4, 3.0
SPEECH = {"input": "A sentence that gives a second of audio or more.", "num_inference_steps": 1,
          "response_format": "pcm"}


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory,
            server_cache: dict[str, str]) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("limited")
    bob = new_key()
    proc = ServerProcess(["--voices-dir", str(root / "voices"), "--rate-limit", f"{RATE}/3s",
                          "--audio-limit", "0.5/3s", "--api-key", f"bob:{bob}"], root / "serve.log",
                         env=server_cache, api_key=new_key())
    proc.bob = bob  # type: ignore[attr-defined]
    yield proc
    proc.stop()
    proc.assert_quiet()


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _refused(response: httpx.Response) -> tuple[int, float]:
    """(Retry-After, retry-after-ms) of a 429 with OpenAI's rate_limit_exceeded body."""
    assert response.status_code == 429, response.text
    error = response.json()["error"]
    assert error["code"] == "rate_limit_exceeded" and error["type"] == "rate_limit_error", error
    seconds, ms = int(response.headers["retry-after"]), int(response.headers["retry-after-ms"])
    assert seconds == -(-ms // 1000) and 1 <= seconds, (seconds, ms)
    return seconds, ms / 1000


def _until(deadline: float) -> None:
    time.sleep(max(0.0, deadline - time.monotonic()))


def test_the_rate_limit(limited: ServerProcess) -> None:
    key = limited.api_key
    assert key is not None
    other = new_key()  # not configured: refused with 401, not counted against anyone
    assert httpx.get(limited.url + "/v1/models", headers=_auth(other)).status_code == 401
    for _ in range(RATE):
        assert httpx.get(limited.url + "/v1/models", headers=_auth(key)).status_code == 200
    refused = httpx.get(limited.url + "/v1/models", headers=_auth(key))
    at = time.monotonic()
    seconds, exact = _refused(refused)
    assert seconds <= 3 and f"{RATE}/3s" in refused.json()["error"]["message"]
    with pytest.raises(openai.RateLimitError):
        openai.OpenAI(base_url=limited.url + "/v1", api_key=key, max_retries=0).models.list()
    if exact > 1.0:  # just before it is due: still refused
        _until(at + exact - 0.5)
        _refused(httpx.get(limited.url + "/v1/models", headers=_auth(key)))
    # due: let through. The openai client waits Retry-After by itself (it retries 429s).
    _until(at + seconds)
    models = openai.OpenAI(base_url=limited.url + "/v1", api_key=key, max_retries=3).models.list()
    assert [m.id for m in models] == ["omnivoice-demo"]
    text = httpx.get(limited.url + "/metrics").text
    assert 'audiocpp_key_rejected_total{key="' in text and 'reason="rate_limit"} ' in text


def test_the_audio_limit(limited: ServerProcess) -> None:
    """A key that synthesized its 0.5 s within 3 s is refused (HTTP, and a WebSocket at its handshake)
    until the audio ages out; a WebSocket session that passes the limit mid-way gets an error for the
    next sentence."""
    key = limited.bob  # type: ignore[attr-defined] - not the rate test's key: each key has its own limits
    first = httpx.post(limited.url + "/v1/audio/speech", headers=_auth(key), json=SPEECH, timeout=120)
    assert first.status_code == 200 and float(first.headers["x-audiocpp-audio-duration-ms"]) > 500
    refused = httpx.post(limited.url + "/v1/audio/speech", headers=_auth(key), json=SPEECH, timeout=120)
    at = time.monotonic()
    seconds, exact = _refused(refused)
    assert seconds <= AUDIO_PERIOD_S and "0.5/3s" in refused.json()["error"]["message"]
    url = limited.url.replace("http", "ws", 1) + "/v1/audio/speech/stream"
    with pytest.raises(InvalidStatus) as info:
        asyncio.run(_session(url, key, ["Hi."]))
    assert info.value.response.status_code == 429
    assert int(info.value.response.headers["Retry-After"]) >= 1
    refusals = 2
    if exact > 1.0:
        _until(at + exact - 0.5)
        _refused(httpx.post(limited.url + "/v1/audio/speech", headers=_auth(key), json=SPEECH, timeout=120))
        refusals += 1
    _until(at + seconds)
    events = asyncio.run(_session(url, key, ["The first sentence is long enough to pass the limit. ",
                                             "The second one is refused."]))
    starts = [e for e in events if isinstance(e, dict) and e["type"] == "audio.start"]
    errors = [e for e in events if isinstance(e, dict) and e["type"] == "error"]
    assert len(starts) == 1 and len(errors) == 1, events
    assert errors[0]["code"] == "rate_limit_exceeded" and errors[0]["retry_after"] >= 1, errors
    assert events[-1]["type"] == "session.done", events
    text = httpx.get(limited.url + "/metrics").text
    assert f'audiocpp_key_rejected_total{{key="bob",reason="audio_limit"}} {refusals}' in text, text
    assert 'audiocpp_key_audio_seconds_total{key="bob"}' in text


async def _session(url: str, key: str, texts: list[str]) -> list:
    received: list = []
    async with websockets.connect(url, additional_headers=_auth(key)) as ws:
        await ws.send(json.dumps({"type": "session.config", "voice": "alloy", "num_inference_steps": 1}))
        for text in texts:
            await ws.send(json.dumps({"type": "input.text", "text": text}))
        await ws.send(json.dumps({"type": "input.done"}))
        async for message in ws:
            received.append(message if isinstance(message, bytes) else json.loads(message))
    return received


LONG = {"input": "One sentence for a long take. Then another one follows it. A third keeps going on.",
        "num_inference_steps": 40, "response_format": "pcm"}


def test_one_key_flooding_does_not_hold_back_another(keyed_server: ServerProcess, keys: Keys) -> None:
    """The demo model runs one request at a time here, with a queue of 4 (2 a key): alice's first request
    runs, two wait, her fourth is refused at once; bob's request then goes before alice's waiting ones
    (without keys it would wait behind them)."""
    done: dict[str, float] = {}
    lock = threading.Lock()

    def post(name: str, key: str, body: dict) -> int:
        r = httpx.post(keyed_server.url + "/v1/audio/speech", headers=_auth(key), json=body, timeout=300)
        with lock:
            done[name] = time.monotonic()
        return r.status_code

    def waiting() -> int:
        return httpx.get(keyed_server.url + "/health").json()["models"]["omnivoice-demo"]["queued"]

    rejected = 'audiocpp_key_rejected_total{key="alice",reason="queue"}'
    before = keyed_server.metric(rejected)
    with ThreadPoolExecutor(4) as pool:
        alice = [pool.submit(post, f"alice{i}", keys.alice, {**LONG, "seed": i}) for i in range(3)]
        deadline = time.monotonic() + 30
        while waiting() < 2:
            assert time.monotonic() < deadline, "alice's requests were not admitted"
            time.sleep(0.02)
        t0 = time.monotonic()
        refused = httpx.post(keyed_server.url + "/v1/audio/speech", headers=_auth(keys.alice), json=LONG)
        assert time.monotonic() - t0 < 2 and refused.status_code == 429, refused.text
        error = refused.json()["error"]
        assert error["code"] == "server_busy" and "share" in error["message"], error
        assert int(refused.headers["retry-after"]) >= 1
        bob = pool.submit(post, "bob", keys.bob, {**LONG, "num_inference_steps": 2, "input": "Bob here."})
        assert bob.result() == 200 and [f.result() for f in alice] == [200, 200, 200]
    order = sorted(done, key=done.get)
    assert order.index("bob") <= 1, order  # after alice's running request at most, not after her waiting ones
    assert keyed_server.metric(rejected) == before + 1
