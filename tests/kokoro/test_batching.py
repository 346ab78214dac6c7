"""Kokoro requests batched: every row gives what it gives alone (the same durations, the same audio bit
for bit), whatever it is batched with: rows of different lengths, voices, speeds and seeds, a
deterministic row beside seeded ones, a streaming row beside offline ones, and rows joining the model's
batcher from other threads."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

import audiocpp.engine as ac

from .cases import HELLO, JAPANESE, LONGER


def requests() -> list[ac.TaskRequest]:
    rows = [(HELLO, "af_test", 1.0, 1, True), (LONGER, "jf_test", 1.2, 2, True),
            (JAPANESE, "af_test", 0.9, 3, False),
            (f"{HELLO}\n{JAPANESE}", "jf_test(2)+af_test(1)", 1.0, 4, True),
            ("ʃ", "af_test", 1.0, 5, True)]
    return [ac.TaskRequest(text=text, seed=seed,
                           options={"phonemes": True, "voice": voice, "speed": speed,
                                    "kokoro.source_noise": noise})
            for text, voice, speed, seed, noise in rows]


def same(a: ac.TaskResult, b: ac.TaskResult) -> None:
    assert a.details["pred_dur"] == b.details["pred_dur"]
    assert np.array_equal(a.audio.samples, b.audio.samples)  # bit for bit: rows share no call
    assert [w.as_dict() for w in a.words] == [w.as_dict() for w in b.words]


@pytest.fixture(scope="module")
def model(tiny_ckpt):
    return ac.load(tiny_ckpt)


@pytest.fixture(scope="module")
def alone(model) -> list[ac.TaskResult]:
    session = model.session("tts")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [session.run(r) for r in requests()]


def test_run_batch_rows_equal_alone(model, alone) -> None:
    batched = model.session("tts").run_batch(requests())
    assert max(r.metrics.batch_rows for r in batched) > 1
    for got, expected in zip(batched, alone):
        same(got, expected)


def test_streaming_row_beside_offline_rows(model, alone) -> None:
    offline, streaming = model.session("tts"), model.session("tts", mode="streaming")
    reqs = requests()
    results = model.run_batch([(offline, reqs[0]), (streaming, reqs[1]), (offline, reqs[2])])
    same(results[0], alone[0])
    same(results[2], alone[2])
    single = streaming.run(reqs[1])
    same(results[1], single)


def test_executor_rows_from_threads(model, alone) -> None:
    batcher = model.executor(max_batch=4)
    jobs: list = [None] * len(alone)
    reqs = requests()

    def submit(i: int) -> None:
        jobs[i] = batcher.submit(reqs[i], task="tts")

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(len(reqs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for job, expected in zip(jobs, alone):
        same(job.result(), expected)
