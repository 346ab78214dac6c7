"""TLS and the audit trail against a real ``audiocpp serve``: HTTPS and WSS with a self-signed certificate
made here (``trustme``) through ``httpx``, the ``openai`` client and ``websockets``; the access log's
JSON line per request (HTTP, WebSocket, Wyoming), with the key's label and never the key or the text
(unless ``--log-text``), reopened on SIGHUP after a rotation; uvicorn's own log at ``info`` without the
key a WebSocket sent in its query."""

from __future__ import annotations

import asyncio
import json
import signal
import ssl
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
import websockets
from wyoming.client import AsyncTcpClient
from wyoming.tts import Synthesize

from .conftest import Keys, ServerProcess, new_key

MARK = "Purple elephants dance quietly tonight."


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory, server_cache: dict[str, str]) -> Iterator[ServerProcess]:
    import trustme

    from audiocpp.server.wyoming import _reachable_address

    root = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    outside = _reachable_address("0.0.0.0")
    cert = ca.issue_cert("127.0.0.1", "localhost", *([outside] if outside else []))
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    cert.private_key_pem.write_to_path(str(root / "key.pem"))
    cert.cert_chain_pems[0].write_to_path(str(root / "cert.pem"))
    proc = ServerProcess(["--host", "0.0.0.0", "--voices-dir", str(root / "voices"),
                          "--ssl-certfile", str(root / "cert.pem"), "--ssl-keyfile", str(root / "key.pem"),
                          "--access-log", str(root / "access.log"), "--log-text", "--log-level", "info",
                          "--metrics-public"], root / "serve.log", env=server_cache, api_key=new_key(),
                         verify=str(root / "ca.pem"))
    proc.ca = str(root / "ca.pem")  # type: ignore[attr-defined]
    proc.outside = outside  # type: ignore[attr-defined]
    yield proc
    proc.stop()
    proc.assert_quiet()


def _auth(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_https_and_wss(tls: ServerProcess) -> None:
    ca = tls.verify
    assert tls.url.startswith("https://") and "listening on https://" in tls.log()
    assert httpx.get(tls.url + "/v1/models", headers=_auth(tls.api_key), verify=ca).status_code == 200
    with pytest.raises(httpx.ConnectError):  # the system's CAs do not know this certificate: it is TLS
        httpx.get(tls.url + "/health")
    with pytest.raises(httpx.HTTPError):  # plain HTTP on the TLS port
        httpx.get(tls.url.replace("https://", "http://") + "/health")
    client = openai.OpenAI(base_url=tls.url + "/v1", api_key=tls.api_key, max_retries=0,
                           http_client=openai.DefaultHttpxClient(verify=ca))
    audio = client.audio.speech.create(model="omnivoice-demo", voice="alloy", input="Over TLS.",
                                       response_format="wav", extra_body={"num_inference_steps": 2})
    assert audio.content[:4] == b"RIFF"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=tls.url + "/v1", api_key="wrong-key-of-some-length", max_retries=0,
                      http_client=openai.DefaultHttpxClient(verify=ca)).models.list()

    context = ssl.create_default_context(cafile=tls.ca)  # type: ignore[attr-defined]
    url = tls.url.replace("https://", "wss://") + "/v1/audio/speech/stream"

    async def session(target: str, headers: dict[str, str]) -> list:
        received = []
        async with websockets.connect(target, ssl=context, additional_headers=headers) as ws:
            await ws.send(json.dumps({"type": "session.config", "voice": "alloy", "num_inference_steps": 1}))
            await ws.send(json.dumps({"type": "input.text", "text": "Secure words."}))
            await ws.send(json.dumps({"type": "input.done"}))
            async for message in ws:
                received.append(message if isinstance(message, bytes) else json.loads(message))
        return received

    for target, headers in ((url, _auth(tls.api_key)), (f"{url}?api_key={tls.api_key}", {})):
        received = asyncio.run(session(target, headers))
        assert received[-1]["type"] == "session.done" and any(isinstance(m, bytes) for m in received)
    # uvicorn logs each WebSocket with its path and query at --log-level info: the key is taken out
    log = tls.log_path.read_text(errors="replace")
    assert "api_key=[redacted]" in log and tls.api_key not in log
    outside = tls.outside  # type: ignore[attr-defined]
    assert outside, "no address of this machine other than loopback to test from"
    public = httpx.get(f"https://{outside}:{tls.port}/metrics", verify=ca)  # --metrics-public
    assert public.status_code == 200 and "audiocpp_requests_total" in public.text


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_access_log(keyed_server: ServerProcess, keys: Keys) -> None:
    """One line per request, HTTP, WebSocket and Wyoming alike: the key's label, the client, the route,
    the model, the voice and whether it cloned, the characters in, the audio out, the status, the
    latency; never a key, never the text (no --log-text here)."""
    log = keyed_server.access_log
    assert log is not None and stat.S_IMODE(log.stat().st_mode) == 0o600
    before = len(_lines(log))
    speech = httpx.post(keyed_server.url + "/v1/audio/speech", headers=_auth(keys.alice), timeout=120,
                        json={"input": MARK, "voice": "legacy", "num_inference_steps": 2, "seed": 1})
    assert speech.status_code == 200
    assert httpx.get(keyed_server.url + "/v1/audio/voices", headers=_auth(keys.bob)).status_code == 200
    assert httpx.get(keyed_server.url + "/v1/models").status_code == 401

    async def session() -> None:
        url = keyed_server.url.replace("http", "ws", 1) + "/v1/audio/speech/stream"
        async with websockets.connect(url, additional_headers=_auth(keys.carol)) as ws:
            await ws.send(json.dumps({"type": "session.config", "voice": "alloy", "num_inference_steps": 1}))
            await ws.send(json.dumps({"type": "input.text", "text": "First one. Second "}))
            await ws.send(json.dumps({"type": "input.text", "text": "one."}))
            await ws.send(json.dumps({"type": "input.done"}))
            async for _ in ws:
                pass

    async def wyoming() -> None:
        async with AsyncTcpClient("127.0.0.1", keyed_server.wyoming_port) as client:  # type: ignore[attr-defined]
            await client.write_event(Synthesize(text="From Home Assistant.").event())
            while (event := await client.read_event()) is not None and event.type != "audio-stop":
                pass

    asyncio.run(session())
    asyncio.run(wyoming())
    assert httpx.get(keyed_server.url + "/health").status_code == 200
    deadline = time.monotonic() + 5
    while len(_lines(log)) < before + 6 and time.monotonic() < deadline:
        time.sleep(0.05)
    lines = _lines(log)[before:]
    assert [(line["protocol"], line["route"], line["key"], line["status"]) for line in lines] == [
        ("http", "/v1/audio/speech", "alice", 200), ("http", "/v1/audio/voices", "bob", 200),
        ("http", "/v1/models", None, 401), ("websocket", "/v1/audio/speech/stream", "carol", 200),
        ("wyoming", "wyoming", None, 200), ("http", "/health", None, 200)], lines
    said, listed, _, streamed, home, _ = lines
    assert said["model"] == "omnivoice-demo" and said["voice"] == "legacy" and said["clone"] is True
    assert said["chars"] == len(MARK) and said["method"] == "POST" and said["client"].startswith("127.0.0.1:")
    assert said["audio_s"] == pytest.approx(float(speech.headers["x-audiocpp-audio-duration-ms"]) / 1000,
                                            abs=0.002)
    assert said["latency_ms"] > 0 and said["time"].endswith("Z")
    assert streamed["sentences"] == 2 and streamed["chars"] == len("First one.") + len("Second one.")
    assert streamed["audio_s"] > 0 and streamed["voice"] == "default" and streamed["clone"] is False
    assert home["voice"] == "default" and home["chars"] == len("From Home Assistant.") and home["audio_s"] > 0
    assert listed["model"] is None and listed["voice"] is None
    text = log.read_text()
    assert MARK not in text and "From Home Assistant" not in text and '"text"' not in text
    assert not [k for k in (keys.alice, keys.bob, keys.carol, keys.root, keys.erin) if k in text]


def test_log_text_and_reopen_on_sighup(tls: ServerProcess) -> None:
    """With --log-text the text is in the line; a rotation (the file moved away) and SIGHUP: the server
    writes to a new file at the same path, created private."""
    log = tls.access_log
    assert log is not None
    r = httpx.post(tls.url + "/v1/audio/speech", headers=_auth(tls.api_key), verify=tls.verify, timeout=120,
                   json={"input": MARK, "num_inference_steps": 1})
    assert r.status_code == 200
    assert _lines(log)[-1]["text"] == MARK
    rotated = log.with_name("access.log.1")
    log.rename(rotated)
    count = len(_lines(rotated))
    tls.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while "access log reopened" not in tls.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert log.exists() and stat.S_IMODE(log.stat().st_mode) == 0o600, tls.log()
    assert httpx.get(tls.url + "/v1/models", headers=_auth(tls.api_key), verify=tls.verify).status_code == 200
    assert [line["route"] for line in _lines(log)] == ["/v1/models"]
    assert len(_lines(rotated)) == count
