"""Fixtures of the batch tests: a demo-model manifest with its reference files, and one local
run of it (1 worker, 1 thread) that the CLI, resume and Ray tests compare against."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import soundfile as sf

from tests.support import run_cli, voice_like_signal

from .common import read_rows, summary, write_manifest

# Every item is seeded (t1 by the --seed default) so that every path must give the same audio.
DEMO_ITEMS: list[dict[str, Any]] = [
    {"id": "t1", "text": "Hello there, this is the first line."},
    {"id": "t2", "text": "A second and somewhat longer sentence to read out.", "seed": 12,
     "options": {"num_inference_steps": 8}},
    {"id": "t3", "text": "Language given.", "language": "English", "seed": 13},
    {"id": "c1", "task": "clon", "text": "Cloned speech.", "voice_ref": "refs/a.wav",
     "reference_text": "A calm voice.", "seed": 21},
    {"id": "c2", "task": "clon", "text": "More cloned speech, same voice.", "voice_ref": "refs/a.wav",
     "reference_text": "A calm voice.", "seed": 22},
    {"id": "c3", "task": "clon", "text": "Another voice.", "voice_ref": "refs/b.wav",
     "reference_text": "Another one.", "seed": 23},
    {"id": "d1", "task": "design", "text": "Designed voice.", "instruct": "female, low pitch", "seed": 31,
     "out": "d1.flac"},
    {"id": "bad", "task": "clon", "text": "Unreadable reference.", "voice_ref": "refs/broken.wav",
     "reference_text": "Nothing.", "seed": 41},
]
DEMO_DEFAULTS: dict[str, Any] = {"seed": 11, "options": {"num_inference_steps": 16}}
DEMO_FLAGS = ["--family", "omnivoice", "--seed", "11", "--request-option", "num_inference_steps=16"]


@dataclass
class Run:
    """One finished `audiocpp batch` run."""

    proc: subprocess.CompletedProcess[str]
    out: Path

    @property
    def rows(self) -> list[dict[str, Any]]:
        return read_rows(self.out / "manifest.jsonl")

    @property
    def summary(self) -> dict[str, str]:
        return summary(self.proc.stdout)


@pytest.fixture(scope="session")
def cache_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The cache the autouse fixture points tests at, for session fixtures that run the CLI."""
    return {"AUDIOCPP_CACHE_DIR": str(tmp_path_factory.getbasetemp() / "audiocpp-cache")}


@pytest.fixture(scope="session")
def kokoro_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Kokoro checkpoint folder (voices af_test, jf_test; tests/book/kokoro_tiny.py)."""
    from tests.book.kokoro_tiny import write_kokoro

    return write_kokoro(tmp_path_factory.mktemp("batch-kokoro-model") / "kokoro")


@pytest.fixture(scope="session")
def demo_inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """manifest.jsonl and refs/ (two voices at 24 and 16 kHz, one file that is not audio)."""
    root = tmp_path_factory.mktemp("batch-demo")
    (root / "refs").mkdir()
    sf.write(root / "refs" / "a.wav", voice_like_signal(1, 36000, 24000), 24000, subtype="FLOAT")
    sf.write(root / "refs" / "b.wav", voice_like_signal(2, 20000, 16000), 16000)
    (root / "refs" / "broken.wav").write_bytes(b"RIFF this is not a wave file at all" * 4)
    write_manifest(root / "manifest.jsonl", DEMO_ITEMS)
    return root


def run_batch(manifest: Path, out: Path, *flags: str | Path, env: dict[str, str] | None = None,
              timeout: float = 600) -> Run:
    proc = run_cli("batch", manifest, "--out-dir", out, *flags, env=env, timeout=timeout)
    return Run(proc, out)


@pytest.fixture(scope="session")
def demo_run(demo_inputs: Path, tmp_path_factory: pytest.TempPathFactory, cache_env: dict[str, str]) -> Run:
    out = tmp_path_factory.mktemp("batch-demo-out") / "out"
    # batches of up to 8 (OmniVoice's default on the CPU is 1: batching does not pay there)
    return run_batch(demo_inputs / "manifest.jsonl", out, *DEMO_FLAGS, "--threads", "1", "--batch-size", "8",
                     env=cache_env)
