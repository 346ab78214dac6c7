"""OmniVoice in a batch: every request gives what it gives alone, and upstream's own batch.

- Every parity case (auto, design, duration, speed, clone from audio and from a saved prompt,
  long-form, greedy and seeded) as rows of one batch against the same case alone: identical tokens
  and audio (cosine >= 0.9999; the figures print with ``-s``). Rows differ in text, target length,
  task, guidance, temperature, steps (a 4-step row finishes early) and seed.
- Upstream's batch (one ``generate`` call with lists, greedy): its tokens per item against our
  batch of the same items.
- Joining while running: rows submitted to the batcher from threads join its next MaskGIT call.
- Streaming and offline rows in one batch.
"""

from __future__ import annotations

import numpy as np
import pytest

from audiocpp.engine.records import TaskRequest, VoiceReference
from tests.batching import compare_rows, cosine, join_while_running
from tests.omnivoice.cases import our_options
from tests.omnivoice.test_parity import task_of
from tests.support import one_torch_thread

pytestmark = pytest.mark.parity
_one_thread = pytest.fixture(autouse=True, scope="module")(one_torch_thread)


def tokens(result):
    return [np.asarray(t) for t in result.details["tokens"]]


def request_of(case: dict) -> TaskRequest:
    return TaskRequest(text=case["text"], options=our_options(case),
                       voice=VoiceReference(path=case["ref_audio"]) if case.get("ref_audio") else None,
                       voice_prompt=case.get("voice_prompt_in"))


@pytest.fixture(scope="module")
def rows(ov_model, ov_reference):
    # clone_prompt reads the voice prompt that upstream's 'clone' case wrote (the reference fixture)
    return [(ov_model.session(task_of(case)), request_of(case)) for case in ov_reference.cases]


@pytest.fixture(scope="module")
def alone(rows):
    return [session.run(request) for session, request in rows]


def test_every_case_in_one_batch_gives_its_lone_result(ov_model, rows, alone) -> None:
    steps = {r.options.get("num_inference_steps", 32) for _, r in rows}
    assert len(steps) > 1 and {s.task.value for s, _ in rows} == {"tts", "design", "clone"}
    report = compare_rows(ov_model, rows, tokens, alone=alone)
    assert report.rows == len(rows)


def test_rows_joining_a_running_batch(ov_model, rows, alone) -> None:
    picked = [0, 4, 8, 10, 12]  # greedy, design, clone, sampled clone, long-form
    join_while_running(ov_model, [rows[i] for i in picked], tokens, alone=[alone[i] for i in picked],
                       gap_s=0.02)


def test_streaming_and_offline_rows_in_one_batch(ov_model, rows, alone) -> None:
    streaming = ov_model.session("tts", "streaming")
    picked = rows[1][1]  # auto_sampled
    stream_alone = list(streaming.stream(picked))
    batch = list(ov_model.stream_batch([(streaming, picked), rows[0], rows[4]]))
    mine = [e.event for e in batch if e.key == 0]
    assert [e.kind for e in mine] == [e.kind for e in stream_alone]
    for a, b in zip(stream_alone, mine):
        assert np.array_equal(a.audio.samples, b.audio.samples)
    finals = {e.key: e.event.result for e in batch if e.event is not None and e.event.is_final}
    assert np.array_equal(finals[1].audio.samples, alone[0].audio.samples)
    assert np.array_equal(finals[2].audio.samples, alone[4].audio.samples)


@pytest.mark.parametrize("index", [0, 1], ids=["voiced", "clones"])
def test_upstream_batch_gives_our_batch(ov_model, ov_reference, index: int) -> None:
    """Upstream pads its 2B rows (pad id 1024, per-row masks, each row's own schedule); ours packs
    them: greedy tokens identical, audio within float rounding."""
    case = ov_reference.batches[index]
    ref = np.load(ov_reference.out / f"{case['name']}.npz")
    rows = [(ov_model.session(task_of(item)),
             request_of({**item, "config": case["config"], "seed": 0})) for item in case["batch"]]
    results = ov_model.run_batch(rows)
    assert [r.details["target_lens"][0] for r in results] == ref["target_lens"].tolist()
    worst = 1.0
    for i, result in enumerate(results):
        assert np.array_equal(result.details["tokens"][0], ref[f"tokens_{i}"]), f"item {i}"
        audio = ref[f"audio_{i}"]
        assert result.audio.samples.shape == audio.shape
        worst = min(worst, cosine(result.audio.samples, audio))
    print(f"\nupstream batch of {len(rows)}: tokens identical, worst audio cosine {worst:.9f}")
    assert worst >= 0.99999
