"""API keys against a real ``audiocpp serve`` over real sockets, with the real clients (``httpx``, the
``openai`` client, ``websockets``): every ``/v1`` route and the WebSocket without a key, with a wrong
key, with keys of other lengths, with malformed headers and with the right key (from the keys file, a
flag and the environment); ``/health`` open, ``/metrics`` for this machine and admin keys; the keys file
reloaded on SIGHUP (a removed key refused at once, its open WebSocket session ended); the refusal to
listen beyond this machine without a key; the constant-time comparison; and the leak scanner itself."""

from __future__ import annotations

import asyncio
import base64
import hmac
import json
import signal
import time
from pathlib import Path

import httpx
import openai
import pytest
import websockets
from websockets.exceptions import ConnectionClosedError, InvalidStatus

from tests.support import run_cli

from .conftest import LEAKS, Keys, ServerProcess, new_key, scan

TINY = {"input": "Hi.", "num_inference_steps": 1}


def _routes() -> list[tuple[str, str]]:
    """Every /v1 route of the app (method, path), read from the app itself: a route added later is
    covered without touching this test."""
    import tempfile

    from audiocpp.server.app import ServerState, create_app
    from audiocpp.server.metrics import ServerMetrics
    from audiocpp.server.voices import VoiceStore

    with tempfile.TemporaryDirectory() as folder:
        app = create_app(ServerState(models={}, workers={}, voices=VoiceStore(Path(folder)),
                                     metrics=ServerMetrics()))
    routes = []
    for route in app.routes:
        path = getattr(route, "path", "")
        if path == "/v1" or path.startswith("/v1/"):
            for method in sorted(getattr(route, "methods", None) or {"WEBSOCKET"}):
                if method != "HEAD":
                    routes.append((method, path))
    return routes


ROUTES = _routes()


def _request(server: ServerProcess, method: str, path: str, headers: dict[str, str]) -> httpx.Response:
    path = (path.replace("{name:path}", "legacy" if method == "GET" else "nobody-here")
            .replace("{name}", "omnivoice-demo"))
    kwargs: dict = {"headers": headers, "timeout": 60}
    if path == "/v1/audio/speech":
        kwargs["json"] = TINY
    elif method == "POST":  # a voice upload without its file: a 400 once past the gate
        kwargs["files"] = {"other": ("x", b"1")}
        kwargs["data"] = {"name": "nothing"}
    return httpx.request(method, server.url + path, **kwargs)


def _wrong(keys: Keys) -> dict[str, dict[str, str]]:
    alice = keys.alice
    flipped = alice[:-1] + ("A" if alice[-1] != "A" else "B")
    return {
        "no key": {},
        "a wrong key of the same length": {"Authorization": f"Bearer {flipped}"},
        "a key one character longer": {"Authorization": f"Bearer {alice}x"},
        "a key one character shorter": {"Authorization": f"Bearer {alice[:-1]}"},
        "a short key": {"Authorization": "Bearer sk-1234"},
        "a long key": {"Authorization": "Bearer " + "k" * 3000},
        "no scheme": {"Authorization": alice},
        "Basic": {"Authorization": "Basic " + base64.b64encode(f"user:{alice}".encode()).decode()},
        "Bearer alone": {"Authorization": "Bearer"},
        "empty": {"Authorization": ""},
    }


def _is_401(response: httpx.Response, what: str) -> None:
    assert response.status_code == 401, (what, response.status_code, response.text)
    assert response.headers["www-authenticate"].startswith("Bearer"), what
    error = response.json()["error"]
    assert error["code"] == "invalid_api_key" and error["type"] == "invalid_request_error", error
    assert "Authorization: Bearer KEY" in error["message"] or "not valid" in error["message"], error


def test_every_v1_route_needs_a_key(keyed_server: ServerProcess, keys: Keys) -> None:
    http_routes = [(m, p) for m, p in ROUTES if m != "WEBSOCKET"]
    assert {("POST", "/v1/audio/speech"), ("GET", "/v1/models"), ("DELETE", "/v1/audio/voices/{name:path}"),
            ("GET", "/v1/audio/voices")} <= set(http_routes), http_routes
    failures = keyed_server.metric("audiocpp_auth_failures_total")
    wrong = _wrong(keys)
    for method, path in http_routes:
        for what, headers in wrong.items():
            response = _request(keyed_server, method, path, headers)
            _is_401(response, f"{method} {path} with {what}")
            presented = headers.get("Authorization", "").partition(" ")[2]
            assert len(presented) < 8 or presented not in response.text, (method, path, what)
        for key in (keys.alice, keys.root, keys.carol, keys.erin):  # the file, an admin, the flag, the env
            response = _request(keyed_server, method, path, keys.header(key))
            assert response.status_code not in (401, 403) and response.status_code < 500, (method, path,
                                                                                           response.text)
    # an unknown /v1 route: 401 without a key (routes do not leak), 404 with one
    _is_401(httpx.get(keyed_server.url + "/v1/nothing/here"), "an unknown route")
    assert httpx.get(keyed_server.url + "/v1/nothing/here", headers=keys.header(keys.bob)).status_code == 404
    # a scheme in any case, spaces around the key
    assert httpx.get(keyed_server.url + "/v1/models",
                     headers={"Authorization": f"bearer   {keys.bob}"}).status_code == 200
    assert keyed_server.metric("audiocpp_auth_failures_total") == failures + len(http_routes) * len(wrong) + 1


def test_several_authorization_headers_are_refused(keyed_server: ServerProcess, keys: Keys) -> None:
    headers = [("Authorization", f"Bearer {keys.alice}"), ("Authorization", f"Bearer {keys.bob}")]
    response = httpx.get(keyed_server.url + "/v1/models", headers=headers)
    _is_401(response, "two headers")
    assert "several Authorization headers" in response.json()["error"]["message"]


def test_the_openai_client(keyed_server: ServerProcess, keys: Keys) -> None:
    from openai import OpenAI

    def client(key: str) -> OpenAI:
        return OpenAI(base_url=keyed_server.url + "/v1", api_key=key, max_retries=0, timeout=120)

    for key in ("unused", keys.alice + "0", keys.alice[:20]):
        with pytest.raises(openai.AuthenticationError) as info:
            client(key).audio.speech.create(model="omnivoice-demo", voice="alloy", input="Hi.")
        assert info.value.status_code == 401 and info.value.body["code"] == "invalid_api_key"
        with pytest.raises(openai.AuthenticationError):
            client(key).models.list()
    audio = client(keys.alice).audio.speech.create(model="omnivoice-demo", voice="alloy", input="Hi.",
                                                   response_format="wav",
                                                   extra_body={"num_inference_steps": 2})
    assert audio.content[:4] == b"RIFF"
    assert [m.id for m in client(keys.erin).models.list()] == ["omnivoice-demo"]


def _ws_url(server: ServerProcess, query: str = "") -> str:
    return server.url.replace("http", "ws", 1) + "/v1/audio/speech/stream" + query


async def _session(url: str, headers: dict[str, str] | None = None) -> list:
    received = []
    async with websockets.connect(url, additional_headers=headers or {}) as ws:
        await ws.send(json.dumps({"type": "session.config", "voice": "alloy", "num_inference_steps": 1}))
        await ws.send(json.dumps({"type": "input.text", "text": "Hi there."}))
        await ws.send(json.dumps({"type": "input.done"}))
        async for message in ws:
            received.append(message if isinstance(message, bytes) else json.loads(message))
    return received


def _refused(url: str, headers: dict[str, str] | None = None) -> None:
    with pytest.raises(InvalidStatus) as info:
        asyncio.run(_session(url, headers))
    response = info.value.response
    assert response.status_code == 401, response.status_code
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert json.loads(response.body)["error"]["code"] == "invalid_api_key"


def test_the_websocket(keyed_server: ServerProcess, keys: Keys) -> None:
    from urllib.parse import quote

    wrong = keys.bob[:-1] + ("x" if keys.bob[-1] != "x" else "y")
    _refused(_ws_url(keyed_server))
    _refused(_ws_url(keyed_server), {"Authorization": f"Bearer {wrong}"})
    _refused(_ws_url(keyed_server), {"Authorization": f"Bearer {keys.bob}{keys.bob}"})
    _refused(_ws_url(keyed_server, f"?api_key={quote(wrong)}"))
    _refused(_ws_url(keyed_server, f"?api_key={keys.bob}&api_key={keys.bob}"))
    _refused(_ws_url(keyed_server, f"?api_key={quote(quote(keys.bob + '='))}"))  # encoded twice: not the key
    encoded = "".join(f"%{byte:02X}" for byte in keys.bob.encode())
    for url, headers in ((_ws_url(keyed_server), keys.header(keys.bob)),
                         (_ws_url(keyed_server, f"?api_key={keys.bob}"), None),
                         (_ws_url(keyed_server, f"?model=omnivoice-demo&api_key={encoded}"), None)):
        received = asyncio.run(_session(url, headers))
        assert received[-1] == {"type": "session.done", "total_sentences": 1}, received
        assert any(isinstance(m, bytes) for m in received)
    # the query's key is not in the server's log (uvicorn writes paths with their query at info level)
    assert keys.bob not in keyed_server.log_path.read_text(errors="replace")


def test_health_is_open_and_metrics_are_for_this_machine(keyed_server: ServerProcess, keys: Keys) -> None:
    from audiocpp.server.wyoming import _reachable_address

    assert httpx.get(keyed_server.url + "/health").json()["status"] == "ok"
    local = httpx.get(keyed_server.url + "/metrics")
    assert local.status_code == 200 and "audiocpp_key_requests_total" in local.text
    assert 'key="alice"' in local.text or 'key="bob"' in local.text  # labels, never keys
    address = _reachable_address("0.0.0.0")
    assert address is not None, "no address of this machine other than loopback to test from"
    outside = f"http://{address}:{keyed_server.port}"
    assert httpx.get(outside + "/health").status_code == 200
    refused = httpx.get(outside + "/metrics")
    assert refused.status_code == 403 and "--metrics-public" in refused.json()["error"]["message"]
    assert httpx.get(outside + "/metrics", headers=keys.header(keys.alice)).status_code == 403
    assert httpx.get(outside + "/metrics", headers=keys.header(keys.root)).status_code == 200
    _is_401(httpx.get(outside + "/v1/models"), "from another address")
    assert httpx.get(outside + "/v1/models", headers=keys.header(keys.carol)).status_code == 200


def _wait_for_log(server: ServerProcess, words: str, count: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while server.log_path.read_text(errors="replace").count(words) < count:
        assert time.monotonic() < deadline, f"no {words!r} in the log:\n{server.log()}"
        time.sleep(0.05)


def test_the_keys_file_reloads_on_sighup(keyed_server: ServerProcess, keys: Keys) -> None:
    """A key added works after SIGHUP; removed, it is refused by the very next request, and its open
    WebSocket session ends at its next message; a broken file leaves the keys as they were."""
    dave = new_key()
    file: Path = keyed_server.keys_file  # type: ignore[attr-defined]
    reloads = keyed_server.log_path.read_text(errors="replace").count("keys reloaded")
    _is_401(httpx.get(keyed_server.url + "/v1/models", headers=keys.header(dave)), "dave before")
    file.write_text(keys.file_text(f"dave:{dave}"))
    keyed_server.proc.send_signal(signal.SIGHUP)
    _wait_for_log(keyed_server, "keys reloaded", reloads + 1)
    assert httpx.get(keyed_server.url + "/v1/models", headers=keys.header(dave)).status_code == 200

    async def revoked_session() -> list:
        received = []
        async with websockets.connect(_ws_url(keyed_server), additional_headers=keys.header(dave)) as ws:
            await ws.send(json.dumps({"type": "session.config", "voice": "alloy", "num_inference_steps": 1}))
            await ws.send(json.dumps({"type": "input.text", "text": "Before. Still"}))
            received.append(json.loads(await ws.recv()))  # audio.start of the first sentence
            file.write_text(keys.file_text())  # dave removed
            keyed_server.proc.send_signal(signal.SIGHUP)
            await asyncio.to_thread(_wait_for_log, keyed_server, "keys reloaded", reloads + 2)
            status = await asyncio.to_thread(lambda: httpx.get(keyed_server.url + "/v1/models",
                                                               headers=keys.header(dave)).status_code)
            received.append(status)
            await ws.send(json.dumps({"type": "input.text", "text": "After. "}))
            try:
                async for message in ws:
                    received.append(message if isinstance(message, bytes) else json.loads(message))
            except ConnectionClosedError:  # 1008 is not a normal close
                pass
            received.append(ws.close_code)
        return received

    received = asyncio.run(revoked_session())
    assert received[0]["type"] == "audio.start" and received[1] == 401, received[:2]
    events = [m for m in received[2:] if isinstance(m, dict)]
    assert events[-1]["code"] == "invalid_api_key" and received[-1] == 1008, received
    assert not any(e.get("type") == "audio.start" for e in events), events  # nothing after "Before."

    file.write_text(keys.file_text("this line has: too: many colons"))
    keyed_server.proc.send_signal(signal.SIGHUP)
    _wait_for_log(keyed_server, "the keys file was not reloaded", 1)
    assert httpx.get(keyed_server.url + "/v1/models", headers=keys.header(keys.alice)).status_code == 200
    assert "line 6 of keys.txt" in keyed_server.log()
    file.write_text(keys.file_text())


def test_without_a_key_only_this_machine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Listening beyond loopback without a key refuses to start (exit 2) naming --api-key and the
    opt-out; loopback addresses and names start; --insecure-no-auth starts beyond loopback."""
    from audiocpp.cli.main import main
    from audiocpp.server.auth import is_loopback
    from audiocpp.server.cli import ServeArgs, plan

    proc = run_cli("serve", "--host", "0.0.0.0", "--voices-dir", tmp_path, "--port", "1", timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "--api-key" in proc.stderr and "--insecure-no-auth" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    for host in ("0.0.0.0", "::", "192.0.2.1"):
        with pytest.raises(SystemExit) as info:
            main(["serve", "--host", host, "--voices-dir", str(tmp_path)])
        assert info.value.code == 2
        assert "--api-key" in capsys.readouterr().err
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "localhost", "[::1]"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.0.2.1", "example.invalid"))
    assert plan(ServeArgs(host="0.0.0.0", insecure_no_auth=True, voices_dir=tmp_path)).keys is not None
    assert plan(ServeArgs(host="localhost", voices_dir=tmp_path, env_keys="")).keys is not None
    with pytest.raises(SystemExit):  # a key and the opt-out contradict each other
        main(["serve", "--host", "0.0.0.0", "--insecure-no-auth", "--api-key", new_key(),
              "--voices-dir", str(tmp_path)])
    assert "--insecure-no-auth" in capsys.readouterr().err


@pytest.mark.parametrize(("entry", "words"), [
    ("tiny-k3y", "too short"),
    ("a:b:c:" + "x" * 20, "':'"),
    ("bad label!:" + "x" * 20, "bad label"),
    ("k" * 20 + "é" * 3, "characters a key may not have"),
    ("k" * 600, "at most 512"),
])
def test_bad_keys_are_refused_without_showing_them(entry: str, words: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from audiocpp.cli.main import main

    file = tmp_path / "keys.txt"
    file.write_text(f"# fine\nalice:{'a' * 20}\n{entry}\n", encoding="utf-8")
    for args in (["--api-keys-file", str(file)], ["--api-key", entry]):
        with pytest.raises(SystemExit) as info:
            main(["serve", "--voices-dir", str(tmp_path / "voices"), *args])
        err = capsys.readouterr().err
        assert info.value.code == 2 and words in err, err
        secret = entry.rpartition(":")[2]
        assert secret not in err and "a" * 20 not in err, err
    assert "line 3 of keys.txt" in (main_err := _err(main, tmp_path, file, capsys)), main_err


def _err(main, tmp_path: Path, file: Path, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        main(["serve", "--voices-dir", str(tmp_path / "voices"), "--api-keys-file", str(file)])
    return capsys.readouterr().err


def test_duplicate_and_missing_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from audiocpp.cli.main import main

    key = "k" * 24
    file = tmp_path / "keys.txt"
    for text, words in ((f"a:{key}\nb:{key}\n", "is the same key as at line 1"),
                        (f"a:{key}\na:{'j' * 24}\n", "the label 'a' is used")):
        file.write_text(text)
        assert words in _err(main, tmp_path, file, capsys)
    with pytest.raises(SystemExit) as info:
        main(["serve", "--voices-dir", str(tmp_path / "v"), "--api-keys-file", str(tmp_path / "none.txt")])
    assert info.value.code == 2 and "does not exist" in capsys.readouterr().err


def test_keys_are_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every configured key is compared, whichever matches (or none), over fixed-length digests: the time
    does not depend on which key matched, how much of one matched, or the presented length."""
    from audiocpp.server import auth

    entries = [auth.parse_entry(f"k{i}:key-number-{i}-{'x' * 20}", f"#{i}") for i in range(5)]
    ring = auth.KeyRing(b"s" * 32, entries)
    calls: list[tuple[int, int]] = []
    real = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        calls.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", counting)
    for presented, label in ((entries[0].secret, "k0"), (entries[4].secret, "k4"), ("nope", None),
                             (entries[0].secret + "x" * 100, None)):
        calls.clear()
        principal = ring.authenticate(presented.encode())
        assert (principal.label if principal else None) == label
        assert calls == [(32, 32)] * 5, calls


def test_the_leak_scanner_finds_a_key(keyed_server: ServerProcess, keys: Keys) -> None:
    """The grep of this suite works: a key a client sends as a voice name comes back in the 400's message
    (the client's own words), and the scanner reports it."""
    r = httpx.post(keyed_server.url + "/v1/audio/speech", headers=keys.header(keys.alice),
                   json={**TINY, "voice": keys.alice})
    assert r.status_code == 400
    assert LEAKS and LEAKS[0][0] == "POST /v1/audio/speech", LEAKS
    LEAKS.clear()
    scan("a file", f"line\n{keys.bob}\n".encode())
    assert LEAKS == [("a file", keys.bob[:4])]
    LEAKS.clear()
