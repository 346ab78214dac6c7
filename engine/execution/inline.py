"""Requests run in the calling thread: for tools that need the thread-local state of torch around a
synthesis (a ``TorchDispatchMode`` counting ops, ``torch.profiler``'s CPU activity of one thread), where
an executor's worker thread would run the ops outside it. Not for serving: nothing else can join."""

from __future__ import annotations

from collections.abc import Sequence

from ..guard import model_guard
from ..records import TaskRequest, TaskResult
from .loop import BatchLoop, RowSession


def run_here(model: object, rows: Sequence[tuple[RowSession, TaskRequest]]) -> list[TaskResult]:
    """``rows`` of ``model`` as one batch run by this thread (holding the model's guard): the results, in
    row order; a row's error is raised."""
    results: list[TaskResult | None] = [None] * len(rows)
    with model_guard(model).held(what="the model"):
        loop = BatchLoop()
        for index, (session, request) in enumerate(rows):
            loop.add(index, session, request)
        try:
            while len(loop):
                for row_event in loop.step():
                    if row_event.error is not None:
                        raise row_event.error
                    if row_event.is_final:
                        results[row_event.key] = row_event.event.result  # type: ignore[index,union-attr]
        finally:
            loop.close()
    return [r for r in results if r is not None]
