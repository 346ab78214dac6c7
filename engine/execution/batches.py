"""Many requests run as one batch and waited for together: ``run_batch`` / ``stream_batch`` of sessions and
models, over an in-process executor of their own (every row joins at the first step; ``max_batch``: at
most that many at once, the next joining as one leaves)."""

from __future__ import annotations

import queue
from collections.abc import Iterator, Sequence
from typing import Any

from ..metrics import Stopwatch
from ..records import TaskRequest
from .jobs import RowEvent
from .local import ExecutorModel, LocalExecutor
from .loop import BatchResults, RowSession


def stream_rows(model: ExecutorModel, rows: Sequence[tuple[RowSession, TaskRequest]], *,
                max_batch: int | None = None, deadline_s: float | None = None) -> Iterator[RowEvent]:
    """``rows`` (a session of ``model`` and a request each) as one batch: ``RowEvent``s tagged with the
    row's index, each row's events in order, rows interleaved as they produce them. Closing the iterator
    early cancels what is still running; ``deadline_s``: each row's (``Job.cancel_after``)."""
    if not rows:
        return
    events: queue.Queue[RowEvent] = queue.Queue()
    limit = len(rows) if max_batch is None else max(1, int(max_batch))
    executor = LocalExecutor(model, max_batch=limit, name=f"the {model.family} model")
    try:
        jobs = executor.submit_all([request for _, request in rows], sessions=[s for s, _ in rows],
                                   sink=events.put, deadline_s=deadline_s)
        index = {job.key: i for i, job in enumerate(jobs)}
        left = len(jobs)
        while left:
            event = events.get()
            left -= event.is_final
            yield RowEvent(index[event.key], event.event, event.error)
    finally:
        executor.close()


def run_rows(model: ExecutorModel, rows: Sequence[tuple[RowSession, TaskRequest]], *,
             return_exceptions: bool = False, max_batch: int | None = None,
             deadline_s: float | None = None) -> BatchResults:
    """The results of :func:`stream_rows`, in row order, with the batch's ``wall_s``; a failing row raises
    its error (``return_exceptions``: the error takes its place, the others go on)."""
    clock = Stopwatch()
    results: list[Any] = [None] * len(rows)
    stream = stream_rows(model, rows, max_batch=max_batch, deadline_s=deadline_s)
    try:
        for event in stream:
            if event.error is not None:
                if not return_exceptions:
                    raise event.error
                results[event.key] = event.error
            elif event.event is not None and event.event.is_final:
                results[event.key] = event.event.result
    finally:
        stream.close()
    out = BatchResults(results)
    out.wall_s = clock.elapsed()
    return out
