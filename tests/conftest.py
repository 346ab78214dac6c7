"""Shared pytest fixtures. Helpers for tests live in ``tests/support.py``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

REPO = Path(__file__).resolve().parents[1]

TOY_SRC = Path(__file__).resolve().parent / "data" / "audiocpp_toyfamily"


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
    save_file({"tone.frequencies": np.linspace(200, 800, 32, dtype=np.float32)},
              str(folder / "model.safetensors"))
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


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep extracted package files and demo checkpoints out of the user's cache."""
    if "AUDIOCPP_CACHE_DIR" not in os.environ:
        monkeypatch.setenv("AUDIOCPP_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "audiocpp-cache"))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


_DUMP = None


def pytest_configure(config: pytest.Config) -> None:
    """``AUDIOCPP_RESULT_DUMP=DIR``: record every synthesis result per test (tests/result_dump.py)."""
    global _DUMP
    from tests.result_dump import install

    _DUMP = install()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    if _DUMP is not None:
        _DUMP.start(item.nodeid)
    yield
    if _DUMP is not None:
        _DUMP.finish()
