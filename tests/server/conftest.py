"""Fixtures of the server tests: a real ``audiocpp serve`` subprocess on 127.0.0.1 and a free
port, serving the demo model (built once into the session's cache folder)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import cli_path

#: Few MaskGIT steps: the demo model is tiny, and the tests are about the server.
FAST = {"num_inference_steps": 4}
#: What no client may leave in the server's log.
NOISE = ("Traceback", "never retrieved", "Task was destroyed", "exception was never")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    """``audiocpp serve ARGS`` as a subprocess; ``url`` once ``/health`` answers."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log
        self._log = open(log, "wb")  # noqa: SIM115 - open for the life of the process
        self.proc = subprocess.Popen(
            [str(cli_path()), "serve", "--port", str(self.port), *args],
            stdout=self._log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
        )
        self.wait_ready()

    def wait_ready(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"audiocpp serve exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise AssertionError(f"audiocpp serve did not answer /health in {timeout} s:\n{self.log()}")

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-4000:]

    def rss_bytes(self) -> int:
        with open(f"/proc/{self.proc.pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def metric(self, name: str) -> float:
        """The sum of a Prometheus series' values (every label set) from ``/metrics``."""
        text = httpx.get(self.url + "/metrics", timeout=10).text
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

    def stop(self) -> None:
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


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory, server_cache: dict[str, str],
           voices_dir: Path) -> Iterator[ServerProcess]:
    """The demo model behind ``audiocpp serve``: the issue's load settings (2 workers, a queue of
    8), a 1 MiB body limit and 500 characters of input (for the error tests)."""
    log = tmp_path_factory.mktemp("server-log") / "serve.log"
    proc = ServerProcess(["--voices-dir", str(voices_dir), "--max-concurrency", "2", "--max-queue", "8",
                          "--max-body-mb", "1", "--max-input-chars", "500"], log, env=server_cache)
    yield proc
    proc.stop()
    proc.assert_quiet()


@pytest.fixture()
def client(server: ServerProcess):
    """The real ``openai`` client, pointed at the server (no retries: a 429 must show)."""
    from openai import OpenAI

    return OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)


#: The tiny Audio8 TTS checkpoint (44.1 kHz): a family whose native rate is not OpenAI's 24 kHz.
AUDIO8_TINY = Path(__file__).resolve().parents[1] / "data" / "audio8_tts" / "tiny"


@pytest.fixture(scope="session")
def rates_server(tmp_path_factory: pytest.TempPathFactory,
                 server_cache: dict[str, str]) -> Iterator[ServerProcess]:
    """``omni`` (the OmniVoice demo, 24 kHz) and ``a8`` (the tiny Audio8, 44.1 kHz) behind one server."""
    from audiocpp.families.omnivoice import plugin

    log = tmp_path_factory.mktemp("two-models-log") / "serve.log"
    proc = ServerProcess(["--model", f"omni={plugin.demo_model_path()}", "--model", f"a8={AUDIO8_TINY}",
                          "--voices-dir", str(tmp_path_factory.mktemp("voices"))], log, env=server_cache)
    yield proc
    proc.stop()
    proc.assert_quiet()
