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
