"""Shared pytest fixtures. Helpers for tests live in ``tests/support.py``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep extracted package files and demo checkpoints out of the user's cache."""
    if "AUDIOCPP_CACHE_DIR" not in os.environ:
        monkeypatch.setenv("AUDIOCPP_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "audiocpp-cache"))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO
