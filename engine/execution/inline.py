"""Requests run in the calling thread: for tools that need the thread-local state of torch around a
synthesis (a ``TorchDispatchMode`` counting ops, ``torch.profiler``'s CPU activity of one thread), where
an executor's worker thread would run the ops outside it. The same batch loop as every executor, held in
the caller's thread with the model's guard; not for serving (nothing else can join its batch)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ..guard import model_guard
from ..records import StreamEvent, TaskRequest, TaskResult
from .loop import BatchLoop, RowSession

Rows = Sequence[tuple[RowSession, TaskRequest]]


def stream_here(model: object, rows: Rows) -> Iterator[tuple[int, StreamEvent]]:
    """``rows`` of ``model`` as one batch run by this thread: ``(row index, event)`` as they come; a row's
    error is raised."""
    with model_guard(model).held(what="the model"):
        loop = BatchLoop()
        for index, (session, request) in enumerate(rows):
            loop.add(index, session, request)
        try:
            while len(loop):
                for row_event in loop.step():
                    if row_event.error is not None:
                        raise row_event.error
                    assert row_event.event is not None
                    yield int(row_event.key), row_event.event  # type: ignore[call-overload]
        finally:
            loop.close()


def run_here(model: object, rows: Rows) -> list[TaskResult]:
    """The results of :func:`stream_here`, in row order."""
    results: list[TaskResult | None] = [None] * len(rows)
    for index, event in stream_here(model, rows):
        if event.is_final:
            results[index] = event.result
    return [r for r in results if r is not None]
