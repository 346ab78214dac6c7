"""engine.execution.processes: the executor contract over worker processes (issue 46): submit returns a
job at once, its events stream back over the pipe (to a thread and to asyncio), its result, a
cancellation that reaches the worker (the row leaves at the next step, the others go on), a deadline,
Busy when a worker's queue is full, a request's own error with its class, and a worker that dies failing
its jobs with a clear error and being replaced. The omnivoice demo model, loaded in each worker."""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import time

import numpy as np
import pytest

import audiocpp.engine as ac
from audiocpp.engine import TaskRequest, UsageError
from audiocpp.engine.execution import Busy, Cancelled
from audiocpp.engine.execution.processes import ProcessExecutor, WorkerDied

LONG = " ".join(f"This is sentence number {i} of a long text." for i in range(20))
SLOW = {"num_inference_steps": 64}


def _load_demo(threads: int) -> object:
    import torch

    torch.set_num_threads(threads)
    return ac.load(family="omnivoice")


@pytest.fixture(scope="module")
def pool():
    ready: list[str] = []
    executor = ProcessExecutor(functools.partial(_load_demo, 1), workers=1, max_batch=2, max_queue=1,
                               on_ready=ready.append)
    executor.ready_names = ready  # type: ignore[attr-defined]
    yield executor
    executor.close()


def test_a_request_streams_its_events_and_result_back(pool: ProcessExecutor) -> None:
    import torch

    request = TaskRequest(text="Hello there. Bye.", seed=3,
                          options={"audio_chunk_threshold": 0, "audio_chunk_duration": 1})
    job = pool.submit(request, mode="streaming")
    events = list(job.events(timeout=120))
    assert [e.kind for e in events][-1] == "final" and len(events) >= 2
    assert job.result() is events[-1].result and job.done and job.error is None
    assert pool.ready_names == pool.workers  # type: ignore[attr-defined]
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:  # the same request in this process gives the same audio (one torch thread each)
        here = ac.load(family="omnivoice").create_session("tts", "streaming").run(request)
    finally:
        torch.set_num_threads(before)
    np.testing.assert_allclose(job.result().audio.samples, here.audio.samples, atol=1e-5)


def test_async_iteration_and_a_requests_own_error(pool: ProcessExecutor) -> None:
    async def read() -> list[str]:
        return [event.kind async for event in pool.submit(TaskRequest(text="Hi.", seed=1))]

    assert asyncio.run(read()) == ["final"]
    bad = pool.submit(TaskRequest(text="   "))
    with pytest.raises(UsageError, match="empty"):  # its class and words cross the pipe
        bad.result(timeout=60)
    with pytest.raises(UsageError, match="needs a reference voice") as caught:
        pool.submit(TaskRequest(text="x"), task="clon").result(timeout=60)
    assert caught.value.exit_code == 2 and "hint: pass --voice-ref FILE" in str(caught.value)


def test_cancel_reaches_the_worker_and_the_other_row_goes_on(pool: ProcessExecutor) -> None:
    long = pool.submit(TaskRequest(text=LONG, seed=0, options=SLOW))
    short = pool.submit(TaskRequest(text="Short one.", seed=2))
    time.sleep(0.5)
    sent = time.monotonic()
    long.cancel(Cancelled("stopped by the test"))
    with pytest.raises(Cancelled, match="stopped by the test"):
        long.result(timeout=60)
    assert time.monotonic() - sent < 20
    assert short.result(timeout=120).audio.num_samples > 0


def test_a_deadline_and_busy(pool: ProcessExecutor) -> None:
    late = pool.submit(TaskRequest(text=LONG, seed=0, options=SLOW), deadline_s=0.3)
    with pytest.raises(Cancelled) as caught:
        late.result(timeout=60)
    assert caught.value.deadline_s == 0.3 and "the deadline of 0.3 s passed" in str(caught.value)
    held = [pool.submit(TaskRequest(text=LONG, seed=i, options=SLOW)) for i in range(3)]  # 2 rows + 1 queued
    with pytest.raises(Busy, match="queue is full") as busy:
        pool.submit(TaskRequest(text="one more"))
    assert busy.value.retry_after >= 1
    for job in held:
        job.cancel()
    for job in held:
        with pytest.raises(Cancelled):
            job.result(timeout=60)
    assert pool.active == 0


def test_a_dead_worker_fails_its_jobs_and_is_replaced(pool: ProcessExecutor) -> None:
    (pid,) = pool.pids
    job = pool.submit(TaskRequest(text=LONG, seed=0, options=SLOW))
    time.sleep(0.3)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(WorkerDied, match=r"died while it ran this request \(exit code -9\)"):
        job.result(timeout=60)
    assert pool.pids != [pid] and len(pool.pids) == 1
    assert pool.submit(TaskRequest(text="After.", seed=4)).result(timeout=180).audio.num_samples > 0


def test_a_model_that_does_not_load_fails_with_its_error(tmp_path) -> None:
    broken = ProcessExecutor(functools.partial(ac.load, tmp_path / "missing"), workers=1)
    try:
        job = broken.submit(TaskRequest(text="x"))
        with pytest.raises(UsageError):
            job.result(timeout=120)
        with pytest.raises(UsageError):
            broken.submit(TaskRequest(text="x"))
    finally:
        broken.close()
