"""Fixtures of the VoxCPM1 tests: the tiny 0.5B- and 1.5-style checkpoints and audio files (built
once per session), our models loaded through the voxcpm1 plugin, VoxCPM.cpp-layout GGUFs of the
same weights, and one upstream reference process for every parity case."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support import REPO, one_torch_thread, run_reference
from tools.voxcpm1 import convert_voxcpm_cpp as converter

from .cases import reference_cases, write_audio, write_checkpoints


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_checkpoints(tmp_path_factory.mktemp("voxcpm1-ckpt"))


@pytest.fixture(scope="session")
def audio_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_audio(tmp_path_factory.mktemp("voxcpm1-audio"))


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory, checkpoints: dict[str, Path],
              audio_files: dict[str, Path]) -> dict[str, Any]:
    """Every upstream result, from one reference process: job name -> arrays."""
    root = tmp_path_factory.mktemp("voxcpm1-ref")
    spec = {"checkpoints": {k: str(v) for k, v in checkpoints.items()}, "cases": reference_cases(audio_files),
            "threads": 1}
    spec_path = root / "cases.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    summary = run_reference("voxcpm", REPO / "tools" / "voxcpm2" / "reference.py", spec_path, root / "out")
    results: dict[str, Any] = {name: dict(np.load(root / "out" / f"{name}.npz")) for name in summary["cases"]}
    results["_summary"] = summary
    return results


@pytest.fixture(scope="session")
def loaded(checkpoints: dict[str, Path]):
    """Our models, loaded once: ``loaded(name)`` for a checkpoint name or any path."""
    from audiocpp.families.voxcpm1 import plugin

    cache: dict[str, Any] = {}

    def get(name: str | Path, **load_options: Any):
        key = f"{name}:{sorted(load_options.items())}"
        if key not in cache:
            path = checkpoints[name] if isinstance(name, str) and name in checkpoints else Path(name)
            cache[key] = plugin.load(path, load_options or None)
        return cache[key]

    return get


@pytest.fixture(scope="session")
def cpp_gguf(tmp_path_factory: pytest.TempPathFactory, checkpoints: dict[str, Path]):
    """``cpp_gguf(checkpoint, **converter options)``: the checkpoint as a VoxCPM.cpp GGUF (cached)."""
    root = tmp_path_factory.mktemp("voxcpm1-cpp")
    cache: dict[str, Path] = {}

    def get(name: str, **options: Any) -> Path:
        tag = "-".join(f"{k}={v}" for k, v in sorted(options.items())) or "default"
        key = f"{name}-{tag}"
        if key not in cache:
            cache[key] = converter.convert(checkpoints[name], root / f"{key}.gguf", **options)
        return cache[key]

    return get


_one_thread = pytest.fixture(autouse=True, scope="module")(one_torch_thread)
