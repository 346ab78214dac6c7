"""Fuzz the server's voice uploads (``POST /v1/audio/voices``) at the store the endpoint calls:
mutated audio of every format, any name and transcript. The promise: an ``ApiError`` (a 4xx with
OpenAI's error body) or a stored voice; no other exception (that would be a 500), no temporary
folder left, nothing half-stored under the voice's name.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from . import seeds
from .harness import check, fuzz_settings
from .mutate import mutated

pytest.importorskip("fastapi")


@given(st.one_of(mutated(seeds.audio_seeds(), max_edits=3, focus=128),
                 st.tuples(st.just("raw"), st.binary(max_size=64))),
       st.one_of(st.just("alice"), st.text(max_size=12)), st.text(max_size=50))
@fuzz_settings("upload")
def test_voice_uploads(fuzz_dir: Path, case: tuple[str, bytes], name: str, transcript: str) -> None:
    from server.errors import ApiError
    from server.voices import SALT_FILE, VoiceStore

    folder = fuzz_dir / "voices"
    shutil.rmtree(folder, ignore_errors=True)
    store = VoiceStore(folder)
    outcome = check("upload", lambda: store.add(name, case[1], transcript), allowed=(ApiError,))
    left = [p.name for p in folder.iterdir() if p.name.startswith(".") and p.name != SALT_FILE]
    assert not left, f"temporary files left: {left}"
    if isinstance(outcome, ApiError):
        assert 400 <= outcome.status < 500 and outcome.message
        assert store.get(name) is None if isinstance(name, str) else True
    else:
        assert store.get(name) is not None
