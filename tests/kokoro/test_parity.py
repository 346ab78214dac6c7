"""Kokoro against hexgrad's KModel (PyPI kokoro 0.9.4) on random checkpoints, float32: the same durations
and the same audio (cosine >= 0.99999; in practice bit for bit on one thread), for every case in cases.py:
seeded and deterministic sources, speeds, voices, several lines under one seed, streaming sentences,
symbols outside the vocabulary, the released file's layout quirks, and the real v1.0 config."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from tests.support import one_torch_thread

from .cases import CASES, Case

pytestmark = pytest.mark.parity


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    yield from one_torch_thread()


def ours(loaded, case: Case):
    import audiocpp.engine as ac

    model = loaded(case.checkpoint)
    session = model.session("tts", mode="streaming" if case.streaming else "offline")
    request = ac.TaskRequest(text=case.request_text, seed=case.seed,
                             options={"phonemes": True, "voice": case.voice, "speed": case.speed,
                                      "kokoro.source_noise": case.noise})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return session.run(request)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_matches_upstream(case: Case, loaded, reference) -> None:
    ref = reference[case.name]
    result = ours(loaded, case)
    assert len(result.details["pred_dur"]) == len(case.chunks)
    audio = []
    for i, pred_dur in enumerate(result.details["pred_dur"]):
        assert pred_dur == ref[f"pred_dur_{i}"].tolist(), f"chunk {i}: durations differ"
        audio.append(ref[f"audio_{i}"])
    expected = np.concatenate(audio)
    got = result.audio.samples
    assert got.shape == expected.shape
    assert cosine(got, expected) >= 0.99999
    assert float(np.abs(got - expected).max()) <= 1e-4 * max(1.0, float(np.abs(expected).max()))
