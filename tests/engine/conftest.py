"""Fixtures for engine tests: the out-of-tree toy family (tests/data/audiocpp_toyfamily)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

TOY_SRC = Path(__file__).resolve().parents[1] / "data" / "audiocpp_toyfamily"


@pytest.fixture(scope="session")
def toy_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pip-install the toy distribution into its own folder (not into the test venv)."""
    work = tmp_path_factory.mktemp("toy")
    src = work / "src"
    shutil.copytree(TOY_SRC, src)
    site = work / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--target", str(site), str(src)],
        capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert list(site.glob("audiocpp_toyfamily-*.dist-info"))
    return site


@pytest.fixture()
def toy_model_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "toy-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "toy_tone", "seconds_per_char": 0.01}))
    save_file({"tone.frequencies": np.linspace(200, 800, 32, dtype=np.float32)}, str(folder / "model.safetensors"))
    return folder


@pytest.fixture(scope="module")
def toy_plugin():
    """The toy family's plugin object, imported from its source tree (not installed)."""
    src = TOY_SRC / "src"
    sys.path.insert(0, str(src))
    try:
        from audiocpp_toyfamily import plugin
    finally:
        sys.path.remove(str(src))
    return plugin
