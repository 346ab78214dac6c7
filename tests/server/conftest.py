"""Fixtures of the server tests: a real ``audiocpp serve`` subprocess on 127.0.0.1 and a free
port, serving the OmniVoice demo model (built once into the session's cache folder).

The default model. Without ``--model`` the server serves the default model (Kokoro's real weights, where
they are installed), but the tests below were written for the OmniVoice demo (random weights, its
options): a fixture server started without ``--model`` or ``--family`` is given ``--family omnivoice``
(:data:`DEMO_FAMILY`). Kokoro's serving is tested on a tiny Kokoro checkpoint (``test_kokoro_*.py``).

Keys. The session's ``server`` runs without keys (loopback, as before keys existed; with
``AUDIOCPP_TEST_SERVER_KEYS=1`` it runs with one, so that every test of it runs both ways); the other
shared servers (two models, Wyoming, batching) run with a key. The tests written before keys existed
do not know about them: the key of such a fixture server is sent by every ``httpx``/``httpx2``
(the ``openai`` client's) and ``websockets`` client the tests make that sends none, as a deployment's
clients would (``ServerProcess(..., inject=True)``). The security tests start their own servers and
send (or not) every key themselves.

Leaks. Every key a test configures is registered (:func:`register_key`), and every response body and
header that reaches a client of these tests (``httpx``, ``httpx2``, ``websockets``, ``wyoming``), every
server's log, access log and final ``/metrics`` is searched for each of them: a key found there fails
the test that was running (the issue's grep, done as the tests run).
"""

from __future__ import annotations

import os
import secrets
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import cli_path

#: Keys configured by any test of this session (the leak scanner looks for each).
CONFIGURED_KEYS: set[str] = set()
#: Where a key was found: (where, which key's first 4 characters); cleared by the test that expects one.
LEAKS: list[tuple[str, str]] = []
#: host:port of a fixture server -> the key its clients send (``inject``).
INJECTED: dict[str, str] = {}


def new_key() -> str:
    """A fresh random key (32 characters), registered for the leak scanner."""
    key = secrets.token_urlsafe(24)
    register_key(key)
    return key


def register_key(key: str) -> str:
    CONFIGURED_KEYS.add(key)
    return key


def scan(where: str, data: bytes | str | None) -> None:
    """Record every configured key found in ``data``."""
    if not data or not CONFIGURED_KEYS:
        return
    text = data if isinstance(data, str) else data.decode("latin-1")
    for key in CONFIGURED_KEYS:
        if key in text:
            LEAKS.append((where, key[:4]))

#: Few MaskGIT steps: the demo model is tiny, and the tests are about the server.
FAST = {"num_inference_steps": 4}
#: What no client may leave in the server's log.
NOISE = ("Traceback", "never retrieved", "Task was destroyed", "exception was never")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


#: The family whose demo model a fixture server without ``--model`` serves (see the module's docstring).
DEMO_FAMILY = ("--family", "omnivoice")


class ServerProcess:
    """``audiocpp serve ARGS`` as a subprocess; ``url`` once ``/health`` answers.

    ``api_key``: started with ``--api-key`` it (registered for the leak scanner); ``inject``: the tests'
    clients send it where they send no key; ``verify``: the CA file of a server with TLS (then ``url``
    is https); ``default_model``: no ``--family omnivoice`` added (the real default model, Kokoro)."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str] | None = None, *,
                 api_key: str | None = None, inject: bool = False, verify: str | None = None,
                 default_model: bool = False) -> None:
        if not default_model and not {"--model", "-m", "--family", "-f"} & set(args):
            args = [*DEMO_FAMILY, *args]
        self.port = free_port()
        self.verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=verify) if verify else True
        self.url = f"{'https' if verify else 'http'}://127.0.0.1:{self.port}"
        self.api_key = api_key
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        if api_key:
            register_key(api_key)
            args = [*args, "--api-key", api_key]
            if inject:
                INJECTED[f"127.0.0.1:{self.port}"] = api_key
        self.access_log = Path(args[args.index("--access-log") + 1]) if "--access-log" in args else None
        self.log_path = log
        self._log = open(log, "wb")  # noqa: SIM115 - open for the life of the process
        self.proc = subprocess.Popen(
            [str(cli_path()), "serve", "--port", str(self.port), *args],
            stdout=self._log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
        )
        self.wait_ready()

    def voice_folder(self, voices_dir: Path, name: str) -> Path:
        """Where this server keeps the voice ``name`` its clients store (under its key's owner id)."""
        if self.api_key is None:
            return voices_dir / name
        from audiocpp.server.auth import KeyRing

        salt = bytes.fromhex((voices_dir / ".owner-salt").read_text().strip())
        return voices_dir / f"@{KeyRing(salt).owner_id(self.api_key)}" / name

    @property
    def client_key(self) -> str:
        """What an ``openai`` client of this server passes as ``api_key``."""
        return self.api_key or "unused"

    def wait_ready(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"audiocpp serve exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx.get(self.url + "/health", timeout=2, verify=self.verify).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise AssertionError(f"audiocpp serve did not answer /health in {timeout} s:\n{self.log()}")

    def log(self) -> str:
        """The whole log: start-up lines stay findable after many requests' lines."""
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def rss_bytes(self) -> int:
        with open(f"/proc/{self.proc.pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def metric(self, name: str) -> float:
        """The sum of a Prometheus series' values (every label set) from ``/metrics``."""
        text = httpx.get(self.url + "/metrics", timeout=10, verify=self.verify).text
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def assert_quiet(self) -> None:
        """Nothing a client can cause (a disconnect, a bad request) leaves a traceback or an asyncio
        complaint in the log, also at shutdown (where a task left pending is reported)."""
        log = self.log_path.read_text(errors="replace")
        noise = [n for n in NOISE if n in log]
        assert not noise, f"the server's log has {noise}:\n{log[-3000:]}"

    def scan_outputs(self) -> None:
        """The server's log, access log and metrics searched for every configured key."""
        if self.proc.poll() is None:
            try:
                scan(f"{self.log_path.name}: /metrics",
                     httpx.get(self.url + "/metrics", timeout=10, verify=self.verify).content)
            except httpx.HTTPError:
                pass
        self._log.flush()
        scan(f"the log {self.log_path}", self.log_path.read_bytes())
        if self.access_log is not None and self.access_log.exists():
            scan(f"the access log {self.access_log}", self.access_log.read_bytes())

    def stop(self) -> None:
        if not self._log.closed:
            self.scan_outputs()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()


@pytest.fixture(scope="session")
def server_cache(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The cache folder the CLI runs of these tests use too (tests/conftest.py), so the demo
    model is built once for servers and CLI runs alike."""
    cache = os.environ.get("AUDIOCPP_CACHE_DIR") or str(tmp_path_factory.getbasetemp() / "audiocpp-cache")
    return {"AUDIOCPP_CACHE_DIR": cache}


@pytest.fixture(scope="session")
def voices_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("voices")


#: ``AUDIOCPP_TEST_SERVER_KEYS=1``: the session's ``server`` runs with a key too.
KEYED_RUN = os.environ.get("AUDIOCPP_TEST_SERVER_KEYS", "") not in ("", "0")


def fixture_key(keyed: bool = True) -> str | None:
    return new_key() if keyed else None


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory, server_cache: dict[str, str],
           voices_dir: Path) -> Iterator[ServerProcess]:
    """The demo model behind ``audiocpp serve``: the issue's load settings (2 workers, a queue of
    8), a 1 MiB body limit and 500 characters of input (for the error tests); no keys (loopback), or
    one with AUDIOCPP_TEST_SERVER_KEYS=1."""
    log = tmp_path_factory.mktemp("server-log") / "serve.log"
    proc = ServerProcess(["--voices-dir", str(voices_dir), "--max-concurrency", "2", "--max-queue", "8",
                          "--max-body-mb", "1", "--max-input-chars", "500"], log, env=server_cache,
                         api_key=fixture_key(KEYED_RUN), inject=True)
    yield proc
    proc.stop()
    proc.assert_quiet()


@pytest.fixture()
def client(server: ServerProcess):
    """The real ``openai`` client, pointed at the server (no retries: a 429 must show)."""
    from openai import OpenAI

    return OpenAI(base_url=server.url + "/v1", api_key=server.client_key, max_retries=0, timeout=120)


#: The tiny Audio8 TTS checkpoint (44.1 kHz): a family whose native rate is not OpenAI's 24 kHz.
AUDIO8_TINY = Path(__file__).resolve().parents[1] / "data" / "audio8_tts" / "tiny"


@pytest.fixture(scope="session")
def rates_server(tmp_path_factory: pytest.TempPathFactory,
                 server_cache: dict[str, str]) -> Iterator[ServerProcess]:
    """``omni`` (the OmniVoice demo, 24 kHz) and ``a8`` (the tiny Audio8, 44.1 kHz) behind one server."""
    from audiocpp.families.omnivoice import plugin

    log = tmp_path_factory.mktemp("two-models-log") / "serve.log"
    proc = ServerProcess(["--model", f"omni={plugin.demo_model_path()}", "--model", f"a8={AUDIO8_TINY}",
                          "--voices-dir", str(tmp_path_factory.mktemp("voices"))], log, env=server_cache,
                         api_key=new_key(), inject=True)
    yield proc
    proc.stop()
    proc.assert_quiet()


# -- the clients of these tests: a fixture server's key where they send none, and the leak scanner ---------
def _inject(request) -> None:
    key = INJECTED.get(f"{request.url.host}:{request.url.port}")
    if key is not None and "authorization" not in request.headers:
        request.headers["Authorization"] = f"Bearer {key}"


class _Tail:
    """The scanner over a body that comes in chunks (a key cut between two chunks is found too)."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.tail = b""
        self.width = max((len(k) for k in CONFIGURED_KEYS), default=64)

    def look(self, chunk: bytes) -> None:
        scan(self.where, self.tail + chunk)
        self.tail = (self.tail + chunk)[-self.width:]


def _stream_classes(module) -> tuple[type, type]:
    class Scanned(module.SyncByteStream):
        def __init__(self, stream, where: str) -> None:
            self.stream, self.tail = stream, _Tail(where)

        def __iter__(self):
            for chunk in self.stream:
                self.tail.look(chunk)
                yield chunk

        def close(self) -> None:
            self.stream.close()

    class AsyncScanned(module.AsyncByteStream):
        def __init__(self, stream, where: str) -> None:
            self.stream, self.tail = stream, _Tail(where)

        async def __aiter__(self):
            async for chunk in self.stream:
                self.tail.look(chunk)
                yield chunk

        async def aclose(self) -> None:
            await self.stream.aclose()

    return Scanned, AsyncScanned


def _patch_httpx(module, monkeypatch: pytest.MonkeyPatch) -> None:
    sync, asynchronous = module.HTTPTransport.handle_request, module.AsyncHTTPTransport.handle_async_request
    scanned, async_scanned = _stream_classes(module)

    def handle_request(self, request):
        _inject(request)
        response = sync(self, request)
        where = f"{request.method} {request.url.path}"
        scan(where + " (headers)", str(list(response.headers.items())))
        response.stream = scanned(response.stream, where)
        return response

    async def handle_async_request(self, request):
        _inject(request)
        response = await asynchronous(self, request)
        where = f"{request.method} {request.url.path}"
        scan(where + " (headers)", str(list(response.headers.items())))
        response.stream = async_scanned(response.stream, where)
        return response

    monkeypatch.setattr(module.HTTPTransport, "handle_request", handle_request)
    monkeypatch.setattr(module.AsyncHTTPTransport, "handle_async_request", handle_async_request)


@pytest.fixture(scope="session", autouse=True)
def _clients_of_the_tests() -> Iterator[None]:
    import importlib

    import websockets.asyncio.client as ws_client
    import websockets.asyncio.connection as ws_connection
    from wyoming.client import AsyncClient

    with pytest.MonkeyPatch.context() as monkeypatch:
        for name in ("httpx", "httpx2"):
            try:
                _patch_httpx(importlib.import_module(name), monkeypatch)
            except ImportError:
                pass
        init, recv = ws_client.connect.__init__, ws_connection.Connection.recv
        read_event = AsyncClient.read_event

        def connect_init(self, uri, *args, **kwargs):
            from urllib.parse import urlsplit

            parts = urlsplit(uri)
            key = INJECTED.get(f"{parts.hostname}:{parts.port}")
            headers = dict(kwargs.get("additional_headers") or {})
            sends_key = any(h.lower() == "authorization" for h in headers) or "api_key=" in uri
            if key is not None and not sends_key:
                kwargs["additional_headers"] = {**headers, "Authorization": f"Bearer {key}"}
            init(self, uri, *args, **kwargs)

        async def scanned_recv(self, *args, **kwargs):
            message = await recv(self, *args, **kwargs)
            scan("a WebSocket message", message)
            return message

        async def scanned_read_event(self, *args, **kwargs):
            event = await read_event(self, *args, **kwargs)
            if event is not None:
                scan("a Wyoming event", repr(event.data))
            return event

        monkeypatch.setattr(ws_client.connect, "__init__", connect_init)
        monkeypatch.setattr(ws_connection.Connection, "recv", scanned_recv)
        monkeypatch.setattr(AsyncClient, "read_event", scanned_read_event)
        yield


@pytest.fixture(autouse=True)
def _no_key_leaks() -> Iterator[None]:
    """Fails the test during which a configured key reached a client, a log or the metrics."""
    LEAKS.clear()
    yield
    found, LEAKS[:] = list(LEAKS), []
    assert not found, f"a configured API key was found in: {found}"


# -- a server with keys, for the security tests ------------------------------------------------------------
LEGACY_TRANSCRIPT = "This is the reference voice."


def write_legacy_voice(folder: Path, name: str, rate: int = 16000, seconds: float = 2.0) -> Path:
    """A voice as the version before keys stored it: ``<voices>/<name>/`` with voice.json, the upload
    and an empty prompts folder, folders 0755 and files 0644 (the umask's modes)."""
    import json

    import soundfile as sf

    from tests.support import voice_like_signal

    voice = folder / name
    (voice / "prompts").mkdir(parents=True)
    sf.write(voice / "reference.wav", voice_like_signal(7, int(seconds * rate), rate), rate, subtype="PCM_16")
    (voice / "voice.json").write_text(json.dumps({"name": name, "transcript": LEGACY_TRANSCRIPT,
                                                  "sample_rate": rate, "duration_s": seconds,
                                                  "created": 1.0e9, "reference": "reference.wav"}, indent=2))
    for path in (folder, voice, voice / "prompts"):
        os.chmod(path, 0o755)
    for path in (voice / "reference.wav", voice / "voice.json"):
        os.chmod(path, 0o644)
    return voice


class Keys:
    """The keys of ``keyed_server``: ``alice`` and ``bob`` (the keys file), ``root`` (an admin key of the
    file), ``carol`` (``--api-key``), ``erin`` (``AUDIOCPP_API_KEYS``)."""

    def __init__(self) -> None:
        self.alice, self.bob, self.root, self.carol, self.erin = (new_key() for _ in range(5))

    def header(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    def file_text(self, *extra: str) -> str:
        return "\n".join(["# the keys of the security tests", f"alice:{self.alice}", "", f"bob:{self.bob}",
                          f"admin:root:{self.root}", *extra]) + "\n"


@pytest.fixture(scope="session")
def keys() -> Keys:
    return Keys()


@pytest.fixture(scope="session")
def keyed_server(tmp_path_factory: pytest.TempPathFactory, server_cache: dict[str, str],
                 keys: Keys) -> Iterator[ServerProcess]:
    """The demo model with keys (a keys file, a flag, the environment), on 0.0.0.0 (which keys allow), an
    access log, at most 4 voices a key, a queue of 4 (2 a key), Wyoming on its default address, and a
    voices folder an earlier version wrote (two shared voices, ``legacy`` and ``old``)."""
    root = tmp_path_factory.mktemp("keyed")
    voices = root / "voices"
    voices.mkdir()
    write_legacy_voice(voices, "legacy")
    write_legacy_voice(voices, "old")
    keys_file = root / "keys.txt"
    keys_file.write_text(keys.file_text())
    wyoming_port = free_port()
    proc = ServerProcess(["--host", "0.0.0.0", "--voices-dir", str(voices), "--api-keys-file", str(keys_file),
                          "--api-key", f"carol:{keys.carol}", "--access-log", str(root / "access.log"),
                          "--max-voices-per-key", "4", "--max-queue", "4",
                          "--wyoming-port", str(wyoming_port), "--max-input-chars", "500"],
                         root / "serve.log", env={**server_cache, "AUDIOCPP_API_KEYS": f"erin:{keys.erin}"})
    proc.voices_dir = voices  # type: ignore[attr-defined]
    proc.keys_file = keys_file  # type: ignore[attr-defined]
    proc.wyoming_port = wyoming_port  # type: ignore[attr-defined]
    yield proc
    proc.stop()
    proc.assert_quiet()
