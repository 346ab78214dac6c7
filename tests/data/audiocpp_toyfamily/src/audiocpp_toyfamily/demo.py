"""The demo checkpoint used when no ``--model`` is given: 32 tones from 200 to 800 Hz, written on
first use into the engine's cache folder (``$AUDIOCPP_CACHE_DIR/demo/toytone-<version>/``)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from audiocpp.engine.plugin_api import cache_dir


def write_demo(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "toy_tone", "seconds_per_char": 0.02}))
    save_file({"tone.frequencies": np.linspace(200, 800, 32, dtype=np.float32)},
              str(folder / "model.safetensors"))


def demo_checkpoint() -> Path:
    """The demo folder, built atomically (in a temporary sibling, then renamed) when missing."""
    try:
        ver = version("audiocpp-toyfamily")
    except PackageNotFoundError:
        ver = "dev"
    target = cache_dir() / "demo" / f"toytone-{ver}"
    if (target / "model.safetensors").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".toytone-", dir=target.parent))
    try:
        write_demo(tmp)
        try:
            os.replace(tmp, target)
        except OSError:  # another process built it first
            if not (target / "model.safetensors").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
