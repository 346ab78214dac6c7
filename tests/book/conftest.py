"""Fixtures of the book tests: the tiny model of every family (built as each family's tests build it),
the test's own books, and the real CLI run as a subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import REPO, run_cli

from . import inputs

#: every `audiocpp book` subprocess: one torch thread (the 2 shared cores)
ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
#: request options that keep each tiny model's chunks short and bounded
FAMILY_FLAGS = {
    "omnivoice": ["-r", "num_inference_steps=4"],
    "voxcpm2": ["-r", "max_tokens=16", "-r", "min_tokens=8", "-r", "retry_badcase=false"],
    "voxcpm1": ["-r", "max_tokens=6", "-r", "min_tokens=4", "-r", "retry_badcase=false"],
    "audio8_tts": ["-r", "max_new_tokens=10"],
}
RATES = {"omnivoice": 24000, "voxcpm2": 48000, "voxcpm1": 16000, "audio8_tts": 44100}

needs_ffmpeg = pytest.mark.skipif(
    shutil.which("ffmpeg") is None or shutil.which("ffprobe") is None,
    reason="ffmpeg is not installed (tools/setup_system.sh installs Debian's)",
)


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from audiocpp.families.omnivoice.demo import write_demo
    from tools.voxcpm1 import checkpoint as v1
    from tools.voxcpm2 import checkpoint as v2

    root = tmp_path_factory.mktemp("book-models")
    write_demo(root / "omnivoice")
    return {
        "omnivoice": root / "omnivoice",
        "voxcpm2": v2.write_checkpoint(root / "voxcpm2", v2.TINY_V2, seed=1234),
        "voxcpm1": v1.write_v1_checkpoint(root / "voxcpm1", v1.TINY_05B, seed=1234, weights="bin"),
        "audio8_tts": REPO / "tests" / "data" / "audio8_tts" / "tiny",
    }


@pytest.fixture(scope="session")
def kokoro_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Kokoro checkpoint folder (voices af_test, jf_test; tests/book/kokoro_tiny.py)."""
    from .kokoro_tiny import write_kokoro

    return write_kokoro(tmp_path_factory.mktemp("book-kokoro-model") / "kokoro")


@pytest.fixture(scope="session")
def books(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("book-sources")
    return {
        "epub3": inputs.write_epub3(root / "tides.epub"),
        "epub2": inputs.write_epub2(root / "tides2.epub"),
        "markdown": inputs.write_markdown(root / "tides.md"),
        "text": inputs.write_text(root / "tides.txt"),
    }


def run_book(
    *args: str | Path, env: dict[str, str] | None = None, timeout: float = 600, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return run_cli("book", *args, env={**ENV, **(env or {})}, timeout=timeout, cwd=cwd)


def ok(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """The run's key=value summary (stdout), after checking it succeeded without a traceback."""
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    return dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)


def ffprobe(path: Path) -> dict:
    proc = subprocess.run(
        [
            "ffprobe",
            "-v",
            "error",
            "-of",
            "json",
            "-show_format",
            "-show_streams",
            "-show_chapters",
            str(path),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout)


def leftovers(folder: Path) -> list[str]:
    """Temporary files left in a folder (there should be none)."""
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))
