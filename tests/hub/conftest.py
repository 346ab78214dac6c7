"""Fixtures of the hub tests: a fake Hugging Face Hub on 127.0.0.1 (tests/hub/fakehub.py), the
OmniVoice demo checkpoint it serves, and the real CLI run against it with its own HF_HOME.

Nothing leaves the machine: HF_ENDPOINT points at the fake hub, every HF_* variable of the
caller's environment (tokens, offline switches, cache paths) and proxy variables are dropped.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import cli_path

from .fakehub import FakeHub

_DROPPED = ("HF_", "HUGGING_FACE_", "TRANSFORMERS_OFFLINE", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
            "http_proxy", "https_proxy", "all_proxy", "AUDIOCPP_DEBUG")


@pytest.fixture(scope="session")
def hub() -> Iterator[FakeHub]:
    server = FakeHub()
    yield server
    server.close()


@pytest.fixture(scope="session")
def demo_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The OmniVoice demo checkpoint (k2-fsa/OmniVoice layout, random weights) as repo files."""
    from audiocpp.families.omnivoice.demo import write_demo

    folder = tmp_path_factory.mktemp("demo") / "omnivoice"
    write_demo(folder)
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory: pytest.TempPathFactory, demo_files: dict[str, bytes]) -> Path:
    """The same checkpoint as a local folder."""
    folder = tmp_path_factory.mktemp("demo-local") / "OmniVoice"
    for rel, data in demo_files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    return folder


class HubEnv:
    """The environment of one test: HF_ENDPOINT -> the fake hub, a fresh HF_HOME."""

    def __init__(self, hub: FakeHub, home: Path) -> None:
        self.hub = hub
        self.home = home
        self.vars = {k: v for k, v in os.environ.items() if not k.startswith(_DROPPED)}
        self.vars.update(HF_ENDPOINT=hub.url, HF_HOME=str(home), HF_HUB_DISABLE_TELEMETRY="1",
                         NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost",
                         # one torch thread: spinning OpenMP threads make tiny models crawl on busy CPUs
                         OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")

    @property
    def cache(self) -> Path:
        return self.home / "hub"

    def run(self, *args: str | Path, extra: dict[str, str] | None = None, timeout: float = 600,
            **popen: object) -> subprocess.CompletedProcess[str]:
        """The real ``audiocpp`` console script; never raises on a non-zero exit."""
        return subprocess.run([str(cli_path()), *map(str, args)], env={**self.vars, **(extra or {})},
                              capture_output=True, text=True, input="", timeout=timeout, **popen)

    def popen(self, *args: str | Path, extra: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen([str(cli_path()), *map(str, args)], env={**self.vars, **(extra or {})},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                               text=True)


@pytest.fixture()
def env(hub: FakeHub, tmp_path: Path) -> HubEnv:
    hub.clear_log()
    hub.repos.clear()  # each test publishes its own repos
    hub.faults.__init__()  # and sets its own faults
    return HubEnv(hub, tmp_path / "hf-home")


def fields(stdout: str) -> dict[str, str]:
    """The key=value lines the CLI prints."""
    return dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line)


def assert_fails(proc: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    """One clean error: the exit code, the message parts, no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("error: ") or "\nerror: " in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in proc.stderr, (needle, proc.stderr)
