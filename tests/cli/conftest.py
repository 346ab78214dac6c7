"""Fixtures of the CLI tests (issue 14): the OmniVoice demo checkpoint written once, the same
model loaded in this process (one torch thread, as the CLI runs here), a reference WAV, and
helpers to run the real CLI as a subprocess and read its stdout while it runs."""

from __future__ import annotations

import os
import struct
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tests.support import cli_path, one_torch_thread, voice_like_signal

#: every CLI subprocess: one thread (the 2 shared cores), no debug tracebacks
CLI_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
#: long-form chunking on at 1 s: the demo model yields one audio event per sentence
CHUNKED = ("-r", "audio_chunk_threshold=0", "-r", "audio_chunk_duration=1")


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from audiocpp.families.omnivoice.demo import write_demo

    out = tmp_path_factory.mktemp("cli-demo") / "OmniVoice"
    write_demo(out)
    return out


@pytest.fixture(scope="module")
def _one_thread():
    yield from one_torch_thread()


@pytest.fixture(scope="module")
def demo(demo_dir: Path, _one_thread):
    from audiocpp.engine.registry import get_family

    return get_family("omnivoice").load(demo_dir)


@pytest.fixture(scope="session")
def ref_wav(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli-ref") / "me.wav"
    sf.write(path, voice_like_signal(7, 2 * 16000, 16000), 16000)
    return path


def cli_env() -> dict[str, str]:
    env = {**os.environ, **CLI_ENV}
    env.pop("AUDIOCPP_DEBUG", None)
    return env


def popen_cli(*args: str | Path, stdin: int | None = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
    return subprocess.Popen([str(cli_path()), *map(str, args)], stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=cli_env())


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc.stdout


class WavStreamReader(threading.Thread):
    """Reads a WAV (or raw int16) stream from a running process's stdout, decoding as bytes come;
    records when the first samples arrived and whether the process was still running then."""

    def __init__(self, proc: subprocess.Popen[bytes], raw: bool = False) -> None:
        super().__init__(daemon=True)
        self.proc, self.raw = proc, raw
        self.data = bytearray()
        self.header: dict[str, int] | None = None
        self.samples: list[np.ndarray] = []
        self.first_samples_at: float | None = None
        self.running_at_first_samples: bool | None = None
        self.first_samples = threading.Event()
        self._pending = b""

    def run(self) -> None:
        fd = self.proc.stdout.fileno()
        while True:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            self.data += chunk
            self._decode(chunk)
        self.first_samples.set()  # unblock waiters at the end, samples or not

    def _decode(self, chunk: bytes) -> None:
        self._pending += chunk
        if self.header is None and not self.raw:
            if len(self._pending) < 44:
                return
            head, self._pending = self._pending[:44], self._pending[44:]
            assert head[:4] == b"RIFF" and head[8:16] == b"WAVEfmt " and head[36:40] == b"data", head
            _, tag, channels, rate, _, _, bits = struct.unpack("<IHHIIHH", head[16:36])
            self.header = {"tag": tag, "channels": channels, "rate": rate, "bits": bits,
                           "riff_size": struct.unpack("<I", head[4:8])[0],
                           "data_size": struct.unpack("<I", head[40:44])[0]}
            assert (tag, channels, bits) == (1, 1, 16), self.header
        whole = len(self._pending) // 2 * 2
        if whole:
            block, self._pending = self._pending[:whole], self._pending[whole:]
            self.samples.append(np.frombuffer(block, "<i2").astype(np.float32) / 32768.0)
            if self.first_samples_at is None:
                self.first_samples_at = time.monotonic()
                self.running_at_first_samples = self.proc.poll() is None
                self.first_samples.set()

    def audio(self) -> np.ndarray:
        return np.concatenate(self.samples) if self.samples else np.zeros(0, np.float32)


@pytest.fixture(scope="session")
def demo_prompt(ref_wav: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``audiocpp codec encode`` of the reference with no --model (the demo model)."""
    from tests.support import run_cli

    out = tmp_path_factory.mktemp("cli-prompt") / "me.prompt"
    proc = run_cli("codec", "encode", ref_wav, "--reference-text", "What I say in the reference",
                   "--out", out, env=CLI_ENV)
    ok(proc)
    assert "note: no --model given; using the omnivoice demo model" in proc.stderr
    return out


def best_lag(signal: np.ndarray, part: np.ndarray, around: int, reach: int) -> int:
    """The offset near ``around`` (within ``reach`` samples) where ``part`` matches ``signal`` best."""
    errors = {}
    for lag in range(max(0, around - reach), around + reach + 1):
        window = signal[lag:lag + len(part)]
        if len(window) == len(part):
            errors[lag] = float(np.abs(window - part).max())
    return min(errors, key=errors.__getitem__)
