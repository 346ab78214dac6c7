"""Local worker processes: each loads the model once and synthesizes up to ``batch_size`` items
at once, as rows of one batch: a thin user of the engine's process executor
(engine/execution/processes.py: it spawns, replaces and stops the workers).

The driver hands out items one by one, keeping ``batch_size`` of them in flight at each worker, so it
always knows which items each worker holds; an item joins the running batch of its worker at the next
step, and its result comes back as soon as it is done, when the driver sends the next. A worker keeps
to one voice while that voice has items left (its prepared voice stays in its cache) and takes a voice
no other worker has started before helping with another's. The jobs are watched, so Ctrl-C and SIGTERM
cancel them in their workers (engine/execution/watch.py); an item whose worker died is recorded as
failed.
"""

from __future__ import annotations

import functools
import queue
from collections import deque
from collections.abc import Callable
from typing import Any

from .manifest import Item
from .synth import (
    Done,
    JobSpec,
    PlannedItem,
    Synthesizer,
    describe,
    done_of,
    error_row,
    quiet_engine_warnings,
    request_of,
    voices_prepared,
)

Record = Callable[[Item, Done], None]


def _load(job_json: str) -> Any:
    """In a worker: the model, loaded as every batch worker loads it (threads, warnings kept quiet:
    each item's come back with its result)."""
    quiet_engine_warnings()
    return Synthesizer(JobSpec.from_json(job_json)).model


def voice_runs(items: list[Item], limit: int | None = None) -> list[list[Item]]:
    """Sorted items cut into runs of one task and voice (at most ``limit`` long: a Ray block)."""
    runs: list[list[Item]] = []
    for item in sorted(items, key=Item.sort_key):
        last = runs[-1] if runs else None
        if (last is not None and (limit is None or len(last) < limit) and last[0].voice_key == item.voice_key
                and last[0].task == item.task):
            last.append(item)
        else:
            runs.append([item])
    return runs


class Dispatcher:
    """Which item a free worker takes next: the same voice first, then an untouched voice."""

    def __init__(self, items: list[Item]) -> None:
        self.groups = [deque(run) for run in voice_runs(items)]
        self.started: set[int] = set()

    def next(self, current: int | None) -> tuple[int, Item] | None:
        if current is not None and self.groups[current]:
            return current, self.groups[current].popleft()
        fresh = [g for g, queue in enumerate(self.groups) if queue and g not in self.started]
        if fresh:
            group = fresh[0]
        else:
            busy = [g for g, queue in enumerate(self.groups) if queue]
            if not busy:
                return None
            group = max(busy, key=lambda g: len(self.groups[g]))
        self.started.add(group)
        return group, self.groups[group].popleft()


class LocalPool:
    """N worker processes (a ProcessExecutor) fed by one Dispatcher."""

    def __init__(self, job: JobSpec, workers: int) -> None:
        self.job = job
        self.in_flight = max(1, job.batch_size)
        self.size = workers

    def run(self, items: list[Item], record: Record, on_ready: Callable[[], None]) -> None:
        """Synthesize ``items``, calling ``record(item, done)`` for each."""
        from audiocpp.engine.execution.processes import ProcessExecutor, WorkerDied
        from audiocpp.engine.execution.watch import watch

        dispatcher = Dispatcher(items)
        events: queue.Queue[tuple] = queue.Queue()  # what the reader thread hands the driver's thread
        pool = ProcessExecutor(functools.partial(_load, self.job.to_json()), min(self.size, len(items)),
                               max_batch=self.in_flight, name="the batch workers",
                               on_ready=lambda name: events.put(("ready",)), probe=voices_prepared)
        groups: list[int | None] = [None] * pool.size
        held: list[dict[str, Item]] = [{} for _ in range(pool.size)]

        def feed(worker: int) -> int:
            """Top ``worker`` up to ``in_flight`` items; the number of items that failed at once."""
            failed = 0
            while len(held[worker]) < self.in_flight:
                chosen = dispatcher.next(groups[worker])
                if chosen is None:
                    break
                groups[worker], item = chosen
                try:
                    request = request_of(item)
                except Exception as error:  # noqa: BLE001 - a bad item fails alone
                    record(item, Done(error_row(item, describe(error)), None, pool.workers[worker]))
                    failed += 1
                    continue
                job = pool.submit(request, task=item.task, mode="offline", worker=worker,
                                  session_options=self.job.session_options, deadline_s=self.job.timeout_s)
                planned = PlannedItem(item, job.submitted)
                held[worker][item.id] = item
                watch(job)
                job.add_done_callback(lambda j, w=worker, p=planned: events.put(("done", w, p, j.outcome)))
            return failed

        try:
            pending = len(items)
            for worker in range(pool.size):
                pending -= feed(worker)
            while pending:
                try:  # a timeout, so that Ctrl-C is seen while the workers run
                    event = events.get(timeout=0.2)
                except queue.Empty:
                    continue
                if event[0] == "ready":
                    on_ready()
                    continue
                _, worker, planned, outcome = event
                if pool.load_error is not None:
                    raise pool.load_error
                del held[worker][planned.item.id]
                name = pool.workers[worker]
                if isinstance(outcome, WorkerDied):  # its replacement starts on a voice of its own
                    groups[worker] = None
                    outcome_row = error_row(planned.item, str(outcome).replace("ran this request",
                                                                               "held this item"))
                    record(planned.item, Done(outcome_row, None, name))
                else:
                    record(planned.item, done_of(planned, outcome, name, pool.state(name) or 0))
                pending -= 1
                pending -= feed(worker)
        finally:
            pool.close(timeout=0.5)
