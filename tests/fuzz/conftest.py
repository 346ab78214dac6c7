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
