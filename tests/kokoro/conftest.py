"""Fixtures of the Kokoro tests: tiny (and real-config) random checkpoints in hexgrad's layout, built once
per session, and one upstream reference run for every parity case."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.support import run_reference

from .cases import CASES

REFERENCE_SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "kokoro" / "reference.py"


@pytest.fixture(scope="session")
def checkpoint_tool():
    from tools.kokoro import checkpoint

    return checkpoint


@pytest.fixture(scope="session")
def ckpt_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kokoro-ckpt")


@pytest.fixture(scope="session")
def tiny_ckpt(ckpt_root: Path, checkpoint_tool) -> Path:
    return checkpoint_tool.write_checkpoint(ckpt_root / "tiny", "tiny", seed=1234)


@pytest.fixture(scope="session")
def checkpoints(ckpt_root: Path, checkpoint_tool, tiny_ckpt: Path) -> dict[str, Path]:
    return {
        "tiny": tiny_ckpt,
        # the released file's quirks the other way round: no instance-norm affine, no "module." prefix
        "tiny_plain": checkpoint_tool.write_checkpoint(ckpt_root / "tiny_plain", "tiny", seed=99,
                                                       instance_affine=False, prefix=""),
        "real": checkpoint_tool.write_checkpoint(ckpt_root / "real", "real", seed=5),
    }


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory,
              checkpoints: dict[str, Path]) -> dict[str, dict[str, np.ndarray]]:
    """Every upstream result from one reference process: case name -> arrays (audio_i, pred_dur_i)."""
    root = tmp_path_factory.mktemp("kokoro-ref")
    spec = {"checkpoints": {k: str(v) for k, v in checkpoints.items()},
            "cases": [c.upstream() for c in CASES], "threads": 1}
    (root / "cases.json").write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    summary = run_reference("kokoro", REFERENCE_SCRIPT, root / "cases.json", root / "out")
    assert summary["checked"]["tiny"] > 0, summary
    return {c.name: dict(np.load(root / "out" / f"{c.name}.npz")) for c in CASES}


@pytest.fixture(scope="session")
def loaded(checkpoints: dict[str, Path]):
    """Our models, loaded once: checkpoint name -> LoadedModel."""
    import audiocpp.engine as ac

    cache: dict[str, object] = {}

    def get(name: str):
        if name not in cache:
            cache[name] = ac.load(checkpoints[name])
        return cache[name]

    return get
