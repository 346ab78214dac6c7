"""Fixtures of the fuzz targets, and the per-target counts printed at the end of the session."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import harness


@pytest.fixture(scope="module")
def fuzz_dir() -> Iterator[Path]:
    """One folder per module: each example overwrites its input file there (hypothesis runs
    many examples per test, and function-scoped folders are not reset between them)."""
    with tempfile.TemporaryDirectory(prefix="audiocpp-fuzz-") as folder:
        yield Path(folder)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    text = harness.summary()
    if text:
        terminalreporter.write_line(text)
    harness.write_report()


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """One loaded tiny model of each family with voice prompts: the OmniVoice demo, the committed
    tiny Audio8 folder, a tiny random VoxCPM2 checkpoint (built as tests/voxcpm2 builds it)."""
    from audiocpp.engine import load
    from audiocpp.engine.registry import get_family
    from tools.voxcpm2 import checkpoint

    vox = checkpoint.write_checkpoint(tmp_path_factory.mktemp("vox") / "tiny", checkpoint.TINY_V2, seed=1234)
    repo = Path(__file__).resolve().parents[2]
    return {"omnivoice": load(get_family("omnivoice").demo_model_path()),
            "audio8_tts": load(repo / "tests" / "data" / "audio8_tts" / "tiny"),
            "voxcpm2": load(vox)}


@pytest.fixture(scope="session", autouse=True)
def _warm_thread_pools() -> None:
    """Start torch's and tokenizers' worker threads before any call runs under the harness's
    memory cap: a thread's first allocation reserves a malloc arena (64 MiB of address space
    each), and on a many-core machine a pool started inside a capped call would hit the cap."""
    import torch

    a = torch.randn(1024, 1024)
    (a @ a).sum()
    torch.nn.functional.conv1d(torch.randn(4, 16, 4096), torch.randn(16, 16, 9)).sum()
