"""engine.execution: run_batch / stream_batch, grouping of ops, rows leaving and failing alone, and the
thread-safe in-process executor (joining a running batch, cancelling one request, the window, closing).

Families without ops (the toy family) run through the same API, their rows taking turns; a
test-local session yields ``AddOp``s to watch how the loop groups them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audiocpp.engine import Mode, Task, TaskRequest, UsageError
from audiocpp.engine.batching import Op
from audiocpp.engine.execution import Busy, Cancelled
from audiocpp.engine.records import AudioBuffer
from audiocpp.engine.session import Session, Synthesis

GROUPS: list[int] = []


class AddOp(Op):
    """value + 1 (values below zero fail, as a network fails on bad input); ``key`` groups."""

    def __init__(self, value: float, key: int = 0, delay: float = 0.0) -> None:
        self.value, self.key, self.delay = value, key, delay

    def group_key(self) -> Hashable:
        return self.key

    @classmethod
    def run_group(cls, ops: Sequence[AddOp]) -> list[Any]:
        GROUPS.append(len(ops))
        if any(op.value < 0 for op in ops):
            raise ValueError("negative input")
        time.sleep(max(op.delay for op in ops))
        return [op.value + 1 for op in ops]


class CountingSession(Session):
    """``len(text)`` steps of AddOp from the seed; streams one piece per step when streaming."""

    def _synthesize(self, request: Any):
        value = float(request.seed % 1000)
        if request.text.startswith("-"):
            value = -1.0
        delay = 0.003 if request.text.startswith("slow") else 0.0
        for _ in range(len(request.text)):
            value = yield AddOp(value, key=len(request.text) % 2 if request.text.startswith("parity") else 0,
                                delay=delay)
            if request.streaming:
                yield AudioBuffer(np.full(4, value, np.float32), 16000)
        return Synthesis(AudioBuffer(np.full(8, value, np.float32), 16000), details={"value": value})


@pytest.fixture()
def toy_model(toy_plugin, toy_model_dir: Path):
    return toy_plugin.load(toy_model_dir)


def counting(model, mode: Mode = Mode.OFFLINE) -> CountingSession:
    return CountingSession(model, Task.TTS, mode, {})


@pytest.fixture(autouse=True)
def _clear_groups():
    GROUPS.clear()


# -- run_batch and stream_batch --------------------------------------------------------------------
def test_ops_of_rows_run_in_groups_and_rows_leave_when_done(toy_model) -> None:
    session = counting(toy_model)
    requests = [TaskRequest(text="ab", seed=10), TaskRequest(text="abcd", seed=20),
                TaskRequest(text="abcdef", seed=30)]
    results = session.run_batch(requests)
    assert [r.details["value"] for r in results] == [12, 24, 36]
    assert GROUPS == [3, 3, 2, 2, 1, 1]  # the two-step row leaves after step 2, the four-step one after 4
    assert [round(r.metrics.batch_rows, 2) for r in results] == [3.0, 2.5, 2.0]
    assert results.wall_s >= max(r.metrics.wall_s for r in results) * 0.5
    GROUPS.clear()
    assert [session.run(r).details["value"] for r in requests] == [12, 24, 36] and GROUPS == [1] * 12


def test_ops_with_other_keys_run_in_their_own_groups(toy_model) -> None:
    session = counting(toy_model)
    session.run_batch([TaskRequest(text="parity", seed=1), TaskRequest(text="parityy", seed=2),
                       TaskRequest(text="parity", seed=3)])
    assert sorted(GROUPS[:2]) == [1, 2]


def test_a_failing_row_fails_alone(toy_model) -> None:
    session = counting(toy_model)
    requests = [TaskRequest(text="abc", seed=1), TaskRequest(text="-bad", seed=2), TaskRequest(text="   "),
                TaskRequest(text="abcd", seed=3)]
    results = session.run_batch(requests, return_exceptions=True)
    assert results[0].details["value"] == 4 and results[3].details["value"] == 7
    assert isinstance(results[1], ValueError) and "negative" in str(results[1])
    assert isinstance(results[2], UsageError) and "empty" in str(results[2])
    with pytest.raises(ValueError, match="negative"):
        session.run_batch(requests[:2])


def test_stream_batch_tags_events_and_keeps_each_rows_order(toy_model) -> None:
    session = counting(toy_model, Mode.STREAMING)
    events = list(session.stream_batch([TaskRequest(text="ab", seed=0), TaskRequest(text="abc", seed=5)]))
    by_key = {k: [e.event for e in events if e.key == k] for k in (0, 1)}
    assert [e.kind for e in by_key[0]] == ["audio", "audio", "final"]
    assert [e.kind for e in by_key[1]] == ["audio", "audio", "audio", "final"]
    assert [e.index for e in by_key[1]] == [0, 1, 2, 3]
    assert [float(e.audio.samples[0]) for e in by_key[1][:-1]] == [6, 7, 8]
    assert [e.key for e in events][:4] == [0, 1, 0, 1]  # interleaved as the rows produce them


def test_max_batch_lets_the_next_row_join_as_one_leaves(toy_model) -> None:
    session = counting(toy_model)
    rows = [(session, TaskRequest(text="a" * n, seed=n)) for n in (2, 5, 3, 4)]
    results = toy_model.run_batch(rows, max_batch=2)
    assert [r.details["value"] for r in results] == [4, 10, 6, 8]
    assert max(GROUPS) == 2 and GROUPS[:2] == [2, 2]


def test_a_family_without_ops_runs_its_rows_in_turns(toy_model) -> None:
    """The toy family yields no ops: the sequential fallback, streaming included."""
    session = toy_model.session("tts", "streaming")
    requests = [TaskRequest(text="a bb ccc", seed=1), TaskRequest(text="dd e", seed=2)]
    lone = [list(session.stream(r)) for r in requests]
    events = list(session.stream_batch(requests))
    for key, expected in enumerate(lone):
        mine = [e.event for e in events if e.key == key]
        assert [e.kind for e in mine] == [e.kind for e in expected]
        for a, b in zip(mine, expected):
            np.testing.assert_array_equal(a.audio.samples, b.audio.samples)
    assert [e.key for e in events if e.event.kind == "audio"][:2] == [0, 1]
    offline = toy_model.session("tts").run_batch(requests)
    np.testing.assert_array_equal(offline[1].audio.samples, lone[1][-1].result.audio.samples)


def test_sessions_of_another_model_are_refused(toy_model, toy_plugin, toy_model_dir: Path) -> None:
    other = toy_plugin.load(toy_model_dir)
    with pytest.raises(UsageError, match="belong to the model"):
        toy_model.run_batch([(other.session("tts"), TaskRequest(text="x"))])


# -- the batcher ---------------------------------------------------------------------------------
def test_a_request_joins_a_running_batch_and_leaves_before_it(toy_model) -> None:
    batcher = toy_model.executor(max_batch=4)
    session = counting(toy_model)
    try:
        long = batcher.submit(TaskRequest(text="slow" + "x" * 96, seed=0), session=session)
        time.sleep(0.05)
        assert not long.done
        short = batcher.submit(TaskRequest(text="slow", seed=7), session=session)
        assert short.result(timeout=30).details["value"] == 11
        assert not long.done  # the short request did not wait for the long one
        assert long.result(timeout=30).details["value"] == 100
        assert short.result().metrics.batch_rows == 2.0 and 2 in GROUPS
    finally:
        batcher.close()


def test_cancelling_one_request_stops_only_it(toy_model) -> None:
    batcher = toy_model.executor(max_batch=4)
    session = counting(toy_model)
    try:
        a = batcher.submit(TaskRequest(text="slow" + "x" * 200, seed=0), session=session)
        b = batcher.submit(TaskRequest(text="slow" + "x" * 20, seed=1), session=session)
        time.sleep(0.05)
        a.cancel()
        with pytest.raises(Cancelled):
            a.result(timeout=30)
        assert b.result(timeout=30).details["value"] == 25
        waiting = batcher.submit(TaskRequest(text="abc", seed=2), session=session)
        waiting.cancel()
        with pytest.raises(Cancelled):
            waiting.result(timeout=30)
    finally:
        batcher.close()


def test_requests_within_the_window_start_together(toy_model) -> None:
    batcher = toy_model.executor(max_batch=8, window_s=0.3)
    try:
        jobs = [batcher.submit(TaskRequest(text="abc", seed=i), task="tts") for i in range(3)]
        # toy sessions yield no ops; use counting sessions for the group sizes
        for job in jobs:
            job.result(timeout=30)
        session = counting(toy_model)
        GROUPS.clear()
        first = batcher.submit(TaskRequest(text="abc", seed=1), session=session)
        time.sleep(0.05)
        second = batcher.submit(TaskRequest(text="abc", seed=2), session=session)
        assert (first.result(timeout=30).details["value"] == 4
                and second.result(timeout=30).details["value"] == 5)
        assert GROUPS == [2, 2, 2]
        assert first.result().metrics.queued_s >= 0.2
    finally:
        batcher.close()


def test_streaming_jobs_yield_their_events(toy_model) -> None:
    batcher = toy_model.executor()
    try:
        job = batcher.submit(TaskRequest(text="a bb ccc", seed=3), task="tts", mode="streaming")
        events = list(job.events(timeout=30))
        assert [e.kind for e in events] == ["audio", "audio", "audio", "final"]
        assert job.result() is events[-1].result
    finally:
        batcher.close()


def test_bad_sessions_fail_at_submit_bad_requests_in_their_job(toy_model) -> None:
    batcher = toy_model.executor()
    try:
        with pytest.raises(UsageError, match="does not support task"):
            batcher.submit(TaskRequest(text="x"), task="clon")
        job = batcher.submit(TaskRequest(text="  "), task="tts")
        with pytest.raises(UsageError, match="empty"):
            job.result(timeout=30)
        assert batcher.run(TaskRequest(text="fine", seed=1)).audio.num_samples > 0
    finally:
        batcher.close()


def test_closing_cancels_waiting_requests_and_refuses_new_ones(toy_model) -> None:
    batcher = toy_model.executor(max_batch=1)
    session = counting(toy_model)
    running = batcher.submit(TaskRequest(text="slow" + "x" * 300, seed=0), session=session)
    queued = batcher.submit(TaskRequest(text="abc", seed=0), session=session)
    time.sleep(0.05)
    batcher.close()
    for job in (running, queued):
        with pytest.raises(Cancelled):
            job.result(timeout=30)
    with pytest.raises(UsageError, match="closed"):
        batcher.submit(TaskRequest(text="x"))
    assert toy_model.executor() is not batcher  # a closed batcher is replaced


def test_a_second_stream_in_one_thread_joins_the_batch(toy_model) -> None:
    """Streams no longer hold the model in the caller's thread: two open at once in one thread are two
    rows of the executor's batch, each with its own events."""
    session = counting(toy_model, Mode.STREAMING)
    first = session.stream(TaskRequest(text="abcd", seed=1))
    assert next(first).kind == "audio"
    second = list(session.stream(TaskRequest(text="ab", seed=2)))
    assert [e.kind for e in second] == ["audio", "audio", "final"] and second[-1].result.details["value"] == 4
    assert [e.kind for e in first] == ["audio"] * 3 + ["final"]


class ThreadsOp(AddOp):
    """Records the torch thread count of the thread that runs it."""

    seen: list[int] = []

    @classmethod
    def run_group(cls, ops: Sequence[AddOp]) -> list[Any]:
        import torch

        torch.ones(64).sum()  # a parallel-capable op: torch fixes this thread's count at its first one
        cls.seen.append(torch.get_num_threads())
        return [op.value + 1 for op in ops]


class ThreadsSession(CountingSession):
    def _synthesize(self, request: Any):
        value = yield ThreadsOp(0.0)
        return Synthesis(AudioBuffer(np.full(8, value, np.float32), 16000))


def test_the_worker_computes_with_the_submitters_torch_threads(toy_model) -> None:
    """torch keeps a thread count per thread once the thread has run an op: a worker started under two
    threads kept two after its caller asked for one, and its sums split another way than the caller's
    (the audio of a model loaded later, on a new worker, differed in its last bits)."""
    import torch

    before = torch.get_num_threads()
    session = ThreadsSession(toy_model, Task.TTS, Mode.OFFLINE, {})
    ThreadsOp.seen.clear()
    try:
        torch.set_num_threads(2)
        session.run(TaskRequest(text="a", seed=1))
        torch.set_num_threads(1)
        session.run(TaskRequest(text="a", seed=1))
        torch.set_num_threads(2)
        session.run(TaskRequest(text="a", seed=1))
    finally:
        torch.set_num_threads(before)
    assert ThreadsOp.seen == [2, 1, 2]


def test_waiting_where_the_batch_cannot_run_is_refused(toy_model) -> None:
    executor = toy_model.executor()
    session = counting(toy_model)
    seen: list[BaseException] = []

    def inside(job) -> None:  # a done-callback runs in the executor's thread
        try:
            executor.submit(TaskRequest(text="ab", seed=1), session=session).result(timeout=1)
        except UsageError as error:
            seen.append(error)

    job = executor.submit(TaskRequest(text="abc", seed=1), session=session)
    job.add_done_callback(inside)
    job.result(timeout=30)
    assert seen and "would wait forever" in str(seen[0])
    with toy_model.guard.held(), pytest.raises(UsageError, match="would wait forever"):  # a hook's thread
        executor.submit(TaskRequest(text="ab", seed=1), session=session).result(timeout=1)


def test_submitting_does_not_wait_for_a_session_being_made(toy_model, monkeypatch) -> None:
    """A request's session is made outside the executor's lock: while one takes a second to build (a new
    compute mode's network), another submit returns at once (a server's event loop calls it)."""
    executor = toy_model.executor(max_batch=1)
    executor.configure(max_queue=1)
    made = threading.Event()

    def slow_session(task, mode, options):
        made.set()
        time.sleep(1.0)
        return counting(toy_model)

    monkeypatch.setattr(toy_model, "create_session", slow_session)
    first = executor.submit(TaskRequest(text="ab", seed=1), task="tts")
    assert made.wait(10)
    start = time.perf_counter()
    second = executor.submit(TaskRequest(text="ab", seed=2), session=counting(toy_model))
    assert time.perf_counter() - start < 0.3
    assert executor.active == 1 and executor.waiting == 1  # the one being made counts as running
    with pytest.raises(Busy):
        executor.submit(TaskRequest(text="ab", seed=3), session=counting(toy_model))
    assert first.result(timeout=30).details["value"] == 3 and second.result(timeout=30).details["value"] == 4


def test_threads_submitting_at_once_each_get_their_own_result(toy_model) -> None:
    batcher = toy_model.executor(max_batch=3)
    session = counting(toy_model)
    results: dict[int, float] = {}

    def worker(i: int) -> None:
        results[i] = batcher.submit(TaskRequest(text="x" * (i + 1), seed=100 * i),
                                    session=session).result(30).details["value"]

    try:
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == {i: 100 * i + i + 1 for i in range(8)}
        assert max(GROUPS) <= 3
    finally:
        batcher.close()


def test_batch_sizes_default_to_what_batching_gains_per_family_and_device() -> None:
    """OmniVoice's MaskGIT steps are compute-bound on the CPU alone: merging requests gains nothing
    there (docs/batching.md), so its batcher, `serve` and `batch` run one at a time on the CPU; the
    autoregressive families batch 8 (1.25-2.5x on AVX2 and AVX-512)."""
    import audiocpp.engine as ac
    from audiocpp.engine.registry import get_family

    assert get_family("omnivoice").default_max_batch("cpu") == 1
    assert get_family("omnivoice").default_max_batch("cuda:1") == 8
    for family in ("voxcpm2", "voxcpm1", "audio8_tts"):
        assert get_family(family).default_max_batch("cpu") == 8
    demo = ac.load(family="omnivoice")
    assert demo.default_max_batch() == 1
    batcher = demo.executor()
    try:
        assert batcher.max_batch == 1
    finally:
        batcher.close()


# -- deadlines and the one cancellation path (Job.cancel_after, engine/execution/watch.py) -----------
def test_a_deadline_cancels_the_running_row_and_says_so(toy_model) -> None:
    batcher = toy_model.executor(max_batch=2)
    session = counting(toy_model)
    try:
        late = batcher.submit(TaskRequest(text="slow" + "x" * 2000, seed=0), session=session, deadline_s=0.2)
        other = batcher.submit(TaskRequest(text="slow" + "x" * 100, seed=1), session=session)
        with pytest.raises(Cancelled, match=r"the deadline of 0\.2 s passed") as caught:
            late.result(timeout=30)
        assert caught.value.deadline_s == 0.2 and caught.value.signal is None
        assert time.perf_counter() - late.submitted < 3  # left at the next step, not after 2000 of them
        assert other.result(timeout=30).details["value"] == 1 + 104  # the other row went on
    finally:
        batcher.close()


def test_a_deadline_reaches_a_waiting_job_and_spares_a_finished_one(toy_model) -> None:
    batcher = toy_model.executor(max_batch=1)
    session = counting(toy_model)
    try:
        ahead = batcher.submit(TaskRequest(text="slow" + "x" * 300, seed=0), session=session)
        queued = batcher.submit(TaskRequest(text="abc", seed=0), session=session, deadline_s=0.1)
        with pytest.raises(Cancelled, match="deadline"):
            queued.result(timeout=30)
        assert batcher.waiting == 0  # its place in the queue was freed at once
        ahead.cancel()
        quick = batcher.submit(TaskRequest(text="ab", seed=5), session=session, deadline_s=0.3)
        assert quick.result(timeout=30).details["value"] == 7
        time.sleep(0.4)  # the deadline passes after the end: nothing changes
        assert quick.error is None and not quick.cancelled
        with pytest.raises(UsageError, match="more than 0 s"):
            batcher.submit(TaskRequest(text="ab"), session=session, deadline_s=0)
    finally:
        batcher.close()


def test_cancel_watched_cancels_the_watched_jobs_with_the_signal(toy_model) -> None:
    import signal

    from audiocpp.engine.execution.watch import cancel_watched, watched

    batcher = toy_model.executor(max_batch=2)
    session = counting(toy_model)
    try:
        job = batcher.submit(TaskRequest(text="slow" + "x" * 2000, seed=0), session=session)
        bystander = batcher.submit(TaskRequest(text="slow" + "x" * 50, seed=0), session=session)
        with watched(job):
            time.sleep(0.05)
            assert cancel_watched(Cancelled("terminated (signal 15)", signal=signal.SIGTERM)) == 1
            with pytest.raises(Cancelled, match="terminated") as caught:
                job.result(timeout=30)
        assert caught.value.signal == signal.SIGTERM
        assert cancel_watched(Cancelled("again")) == 0  # the block ended: no longer watched
        assert bystander.result(timeout=30).details["value"] == 54
    finally:
        batcher.close()
