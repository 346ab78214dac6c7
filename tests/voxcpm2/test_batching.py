"""VoxCPM2 in a batch: every request gives what it gives alone.

Every parity case of the tiny checkpoint (tts with other seeds, steps and guidance, a long minimum,
bad-case retries, design, the four cloning modes, streaming) as rows of one batch, against the same
case alone: the same number of patches (the stop step: rows stop on the stop head or at their cap,
at different steps), latents within float rounding, audio cosine >= 0.9999 (figures print with
``-s``). The rows run one AR step each per batched call: the LM steps on their own KV caches,
the CFM solve from their own noise, grouped by their number of CFM steps.
"""

from __future__ import annotations

import numpy as np
import pytest

from audiocpp.engine.records import TaskRequest, VoiceReference
from tests.batching import compare_rows, join_while_running
from tests.support import one_torch_thread

from .cases import CASES, Case

LATENT_TOL = 1e-4
_one_thread = pytest.fixture(autouse=True, scope="module")(one_torch_thread)


def latents(result):
    return [np.asarray(x) for x in result.details["latents"]]


def row(model, case: Case, audio_files):
    session = model.session(case.task, "streaming" if case.streaming else "offline")
    voice = VoiceReference(path=audio_files[case.reference]) if case.reference else None
    return session, TaskRequest(text=case.text, seed=case.seed, voice=voice,
                                options=case.our_options(audio_files))


@pytest.fixture(scope="module")
def rows(loaded, audio_files):
    return [row(loaded("tiny"), case, audio_files) for case in CASES if case.checkpoint == "tiny"]


@pytest.fixture(scope="module")
def alone(rows):
    return [session.run(request) for session, request in rows]


def test_every_case_in_one_batch_gives_its_lone_result(loaded, rows, alone) -> None:
    patches = {r.details["num_patches"][0] for r in alone}
    stopped = {r.details["stopped"][0] for r in alone}
    assert len(patches) > 2 and stopped == {True, False}  # rows leave at different steps, both ways
    compare_rows(loaded("tiny"), rows, latents, latent_tol=LATENT_TOL, alone=alone)


def test_rows_joining_a_running_batch(loaded, rows, alone) -> None:
    picked = [0, 2, 4, 7, 9]  # tts, long minimum, design, ultimate clone, streaming
    join_while_running(loaded("tiny"), [rows[i] for i in picked], latents, alone=[alone[i] for i in picked],
                       latent_tol=LATENT_TOL)


def test_streamed_pieces_in_a_batch_are_the_lone_ones(loaded, rows) -> None:
    streaming = [(s, r) for s, r in rows if s.mode.value == "streaming"]
    lone = [[e.audio.samples for e in s.stream(r) if not e.is_final] for s, r in streaming]
    events = list(loaded("tiny").stream_batch(streaming + [rows[0]]))
    for key, pieces in enumerate(lone):
        mine = [e.event.audio.samples for e in events if e.key == key and not e.event.is_final]
        assert len(mine) == len(pieces) and all(np.allclose(a, b, atol=1e-5) for a, b in zip(mine, pieces))
