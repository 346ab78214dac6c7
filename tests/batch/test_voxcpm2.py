"""`audiocpp batch` over a tiny VoxCPM2 checkpoint (built as tests/voxcpm2 builds it): every task
and cloning mode, each item's audio identical to `audiocpp`'s for the same request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from tests.support import read_wav, voice_like_signal

from .common import cli_output, write_manifest
from .conftest import Run, run_batch

ITEMS: list[dict[str, Any]] = [
    {"id": "tts", "text": "Hello world.", "seed": 1},
    {"id": "ref1", "task": "clon", "text": "Cloned once.", "voice_ref": "ref.wav", "seed": 2},
    {"id": "ref2", "task": "clon", "text": "Cloned twice, same voice.", "voice_ref": "ref.wav", "seed": 3},
    {"id": "ultimate", "task": "clon", "text": "With its transcript.", "voice_ref": "ref.wav",
     "reference_text": "This is a tiny test.", "seed": 4},
    {"id": "design", "task": "design", "text": "Designed.", "instruct": "a calm voice", "seed": 5},
]
DEFAULTS: dict[str, Any] = {"options": {"max_tokens": 6, "retry_badcase": "false"}}
FLAGS = ["--request-option", "max_tokens=6", "--request-option", "retry_badcase=false", "--format", "wav32",
         "--threads", "1"]


@pytest.fixture(scope="module")
def tiny_voxcpm2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tools.voxcpm2 import checkpoint

    return checkpoint.write_checkpoint(tmp_path_factory.mktemp("batch-voxcpm2") / "tiny", checkpoint.TINY_V2,
                                       seed=1234)


@pytest.fixture(scope="module")
def voxcpm2_run(tiny_voxcpm2: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, Path]:
    root = tmp_path_factory.mktemp("batch-voxcpm2-in")
    sf.write(root / "ref.wav", voice_like_signal(1, 1234, 16000), 16000, subtype="FLOAT")
    manifest = write_manifest(root / "manifest.jsonl", ITEMS)
    return run_batch(manifest, root / "out", "--model", tiny_voxcpm2, *FLAGS), root


def test_every_item_done(voxcpm2_run: tuple[Run, Path]) -> None:
    run, _ = voxcpm2_run
    assert run.proc.returncode == 0, run.proc.stderr
    rows = run.rows
    assert [r["id"] for r in rows] == [i["id"] for i in ITEMS]
    assert all(r["status"] == "ok" and r["output"] == f"{r['id']}.wav" for r in rows)
    assert [r["seed"] for r in rows] == [1, 2, 3, 4, 5]
    assert run.summary["done"] == "5" and run.summary["failed"] == "0"


@pytest.mark.parametrize("item_id", ["tts", "ref2", "ultimate", "design"])
def test_items_equal_the_cli(item_id: str, voxcpm2_run: tuple[Run, Path], tiny_voxcpm2: Path,
                             tmp_path: Path) -> None:
    run, root = voxcpm2_run
    item = next(i for i in ITEMS if i["id"] == item_id)
    out = cli_output(item, root, DEFAULTS, ["--model", str(tiny_voxcpm2), "--format", "wav32",
                                            "--session-option", "voxcpm2.threads=1"], tmp_path / "cli.wav")
    # Samples, not bytes: libsndfile stamps the time into float WAVs (their PEAK chunk).
    ours, rate = read_wav(run.out / f"{item_id}.wav")
    theirs, cli_rate = read_wav(out)
    assert rate == cli_rate == 48000 and np.array_equal(ours, theirs)
