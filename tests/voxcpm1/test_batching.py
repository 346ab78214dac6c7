"""VoxCPM1 (0.5B and 1.5 layouts) in a batch: every request gives what it gives alone.

Every parity case of each tiny checkpoint (tts with other seeds and steps, a long minimum, bad-case
retries, continuation cloning, streaming) as rows of one batch against the same case alone: the same
stop step, latents within float rounding, audio cosine >= 0.9999 (figures print with ``-s``).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.batching import compare_rows
from tests.support import one_torch_thread

from .cases import CASES

LATENT_TOL = 1e-4
_one_thread = pytest.fixture(autouse=True, scope="module")(one_torch_thread)


def latents(result):
    return [np.asarray(x) for x in result.details["latents"]]


@pytest.mark.parametrize("checkpoint", ["tiny_05b", "tiny_15"])
def test_every_case_in_one_batch_gives_its_lone_result(checkpoint: str, loaded, audio_files) -> None:
    model = loaded(checkpoint)
    rows = [(model.session(c.task, "streaming" if c.streaming else "offline"), c.request(audio_files))
            for c in CASES if c.checkpoint == checkpoint]
    alone = [session.run(request) for session, request in rows]
    assert len({r.details["num_patches"][0] for r in alone}) > 1
    compare_rows(model, rows, latents, latent_tol=LATENT_TOL, alone=alone)
