"""`audiocpp book` stopped by SIGTERM, and a chunk past its deadline (--timeout): the one cancellation
path of the command line (issue 46). The chunks being synthesized are cancelled; the run says what it
kept and leaves no output and no temporary file."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from . import inputs
from .conftest import needs_ffmpeg, run_book
from .test_runs import CHAPTERS, chunk_files, start_book, stop_after, temporaries

pytestmark = needs_ffmpeg


@pytest.fixture(scope="module")
def demo_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from audiocpp.families.omnivoice.demo import write_demo

    folder = tmp_path_factory.mktemp("book-cancel") / "omnivoice"
    write_demo(folder)
    return folder


def _args(tmp_path: Path, model: Path, *extra: str) -> list[str | Path]:
    book = inputs.write_markdown(tmp_path / "tides.md", CHAPTERS)
    return [book, "--model", model, "--out", tmp_path / "tides.m4b", "--batch-size", "1", "--seed", "9",
            "-r", "num_inference_steps=16", *extra]


def test_sigterm_keeps_the_chunks_made_and_writes_no_output(demo_model: Path, tmp_path: Path) -> None:
    work = tmp_path / "tides.work"
    rc, err = stop_after(start_book(*_args(tmp_path, demo_model)), work, 2, signal.SIGTERM)
    assert rc == 143, err
    lines = [ln for ln in err.splitlines() if ln.startswith("terminated")]
    assert len(lines) == 1 and "chunks synthesized in this run are kept" in lines[0], err
    assert "Traceback" not in err
    assert not (tmp_path / "tides.m4b").exists() and temporaries(tmp_path) == []
    assert len(chunk_files(work)) >= 2


def test_a_chunk_past_its_deadline_fails_the_run(demo_model: Path, tmp_path: Path) -> None:
    proc = run_book(*_args(tmp_path, demo_model, "--timeout", "0.05"))
    assert proc.returncode == 1, proc.stderr
    error = next(ln for ln in proc.stderr.splitlines() if ln.startswith("error: "))
    assert "chunks failed" in error and error.endswith(": the deadline of 0.05 s passed"), proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert not (tmp_path / "tides.m4b").exists() and temporaries(tmp_path) == []
