"""Fixtures of the Audio8 TTS tests: the committed goldens (tests/data/audio8_tts, written by
tools/audio8_tts/reference.py from the upstream code), our model loaded from the committed tiny
checkpoint, and packages built from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support import REPO

GOLDENS = REPO / "tests" / "data" / "audio8_tts"


@pytest.fixture(scope="session")
def manifest() -> dict[str, Any]:
    return json.loads((GOLDENS / "manifest.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def golden():
    cache: dict[str, dict[str, np.ndarray]] = {}

    def get(name: str) -> dict[str, np.ndarray]:
        if name not in cache:
            cache[name] = dict(np.load(GOLDENS / "goldens" / f"{name}.npz"))
        return cache[name]

    return get


@pytest.fixture(scope="session")
def tiny_dir() -> Path:
    return GOLDENS / "tiny"


@pytest.fixture(scope="session")
def audio_dir() -> Path:
    return GOLDENS / "audio"


@pytest.fixture(scope="session")
def tiny(tiny_dir: Path):
    """Our model on the tiny checkpoint folder (loaded once)."""
    from audiocpp.families.audio8_tts import plugin

    return plugin.load(tiny_dir)


@pytest.fixture(scope="session")
def tiny_unpacked(tiny_dir: Path):
    """Our model with torch's default linear kernels (load option packed_linear=false)."""
    from audiocpp.families.audio8_tts import plugin

    return plugin.load(tiny_dir, {"packed_linear": False})


@pytest.fixture(scope="session")
def packages(tmp_path_factory: pytest.TempPathFactory, tiny_dir: Path) -> dict[str, Path]:
    """The tiny checkpoint as our package (F32, Q8_0, BF16) and as audio.cpp's layout (F32)."""
    from audiocpp.engine.packaging import plan_from_spec, write_package
    from audiocpp.families.audio8_tts import plugin
    from tools.audio8_tts.convert_audiocpp import write_audiocpp_package

    root = tmp_path_factory.mktemp("audio8-packages")
    out = {}
    for wtype in ("f32", "q8_0", "bf16"):
        out[wtype] = root / f"tiny-{wtype}.gguf"
        write_package(plan_from_spec(plugin.spec, {"": tiny_dir}), out[wtype], wtype)
    out["audiocpp"] = write_audiocpp_package(tiny_dir, root / "tiny-audiocpp-f32.gguf", "f32")
    return out
