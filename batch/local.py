"""Local worker processes: each loads the model once and synthesizes up to ``batch_size`` items
at once, as rows of one batch.

The driver hands out items one by one over a pipe per worker, keeping ``batch_size`` of them in
flight at each worker, so it always knows which items each worker holds. A worker submits every
item it receives to its model's batcher: the item joins the running batch at its next step, and its
result goes back as soon as it is done, when the driver sends the next. A worker keeps to one voice
while that voice has items left (its prepared voice stays in its cache) and takes a voice no other
worker has started before helping with another's. Workers ignore SIGINT (the driver decides what
Ctrl-C stops) and exit when the driver's end of their pipe closes, so a killed driver leaves no
worker behind. A worker that dies gets the items it held recorded as failed and is replaced.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from .manifest import Item
from .synth import (
    Done,
    JobSpec,
    Synthesizer,
    error_row,
    load_failure,
    quiet_engine_warnings,
    raise_load_failure,
)

Record = Callable[[Item, Done], None]


def _worker_main(conn: Connection, job_json: str, name: str) -> None:
    """The body of a worker process: receive items, run them on the model's batcher, send results."""
    import threading

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    quiet_engine_warnings()  # each item's warnings come back in its Done; the driver prints them
    try:
        synth = Synthesizer(JobSpec.from_json(job_json))
    except BaseException as error:
        conn.send(("load_error", load_failure(error)))
        return
    lock = threading.Lock()

    def send(message: tuple) -> None:
        with lock:
            try:
                conn.send(message)
            except (BrokenPipeError, OSError):
                pass

    send(("ready",))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            synth.model.executor().close()  # nothing is in flight: the driver asked for the last result first
            return
        synth.submit(Item.from_json(message), name, lambda done: send(("result", done)))


class Dispatcher:
    """Which item a free worker takes next: the same voice first, then an untouched voice."""

    def __init__(self, items: list[Item]) -> None:
        self.groups: list[deque[Item]] = []
        for item in sorted(items, key=Item.sort_key):
            if (self.groups and self.groups[-1][0].voice_key == item.voice_key
                    and self.groups[-1][0].task == item.task):
                self.groups[-1].append(item)
            else:
                self.groups.append(deque([item]))
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


@dataclass
class _Worker:
    name: str
    process: Any
    conn: Connection
    ready: bool = False
    items: dict[str, Item] = field(default_factory=dict)  # in flight, by id
    group: int | None = None
    prepared: int = field(default=0)


class LocalPool:
    """N worker processes (spawned: torch and fork do not mix) fed by one Dispatcher."""

    def __init__(self, job: JobSpec, workers: int) -> None:
        self.job_json = job.to_json()
        self.in_flight = max(1, job.batch_size)
        self.size = workers
        self.context = multiprocessing.get_context("spawn")
        self.workers: list[_Worker] = []
        self.retired: list[_Worker] = []
        self.spawned = 0

    def _spawn(self) -> _Worker:
        parent, child = self.context.Pipe()
        self.spawned += 1
        name = f"audiocpp-batch-{self.spawned}"
        process = self.context.Process(target=_worker_main, args=(child, self.job_json, name), name=name,
                                       daemon=True)
        process.start()
        child.close()
        worker = _Worker(name, process, parent)
        self.workers.append(worker)
        return worker

    def run(self, items: list[Item], record: Record, on_ready: Callable[[], None]) -> None:
        """Synthesize ``items``, calling ``record(item, done)`` for each."""
        dispatcher = Dispatcher(items)
        pending = len(items)
        try:
            for _ in range(min(self.size, len(items))):
                self._spawn()
            while pending:
                handles = [w.conn for w in self.workers] + [w.process.sentinel for w in self.workers]
                for handle in wait(handles):
                    worker = next((w for w in self.workers if handle in (w.conn, w.process.sentinel)), None)
                    if worker is None:
                        continue
                    pending -= self._serve(worker, handle, dispatcher, record, on_ready)
        finally:
            self.close()

    def _serve(self, worker: _Worker, handle: Any, dispatcher: Dispatcher, record: Record,
               on_ready: Callable[[], None]) -> int:
        """Handle one message (or the death) of ``worker``; returns the number of items finished."""
        finished = 0
        message = None
        try:  # a result sent just before the process died is still read first
            if handle is worker.conn or worker.conn.poll():
                message = worker.conn.recv()
        except (EOFError, OSError):
            message = None
        if message is None:
            return self._lost(worker, record)
        if message[0] == "load_error":
            raise_load_failure(message[1])
        if message[0] == "result":
            done: Done = message[1]
            worker.prepared = done.voices_prepared
            item = worker.items.pop(done.row["id"])
            record(item, done)
            finished = 1
        else:
            worker.ready = True
            on_ready()
        self._feed(worker, dispatcher)
        return finished

    def _feed(self, worker: _Worker, dispatcher: Dispatcher) -> None:
        """Top ``worker`` up to ``in_flight`` items; when none are left and it holds none, tell it
        to stop (a dead worker is noticed by its sentinel)."""
        while len(worker.items) < self.in_flight:
            chosen = dispatcher.next(worker.group)
            if chosen is None:
                break
            worker.group, item = chosen
            worker.items[item.id] = item
            try:
                worker.conn.send(item.to_json())
            except OSError:
                pass
        if not worker.items:
            try:
                worker.conn.send(None)
            except OSError:
                pass
            self._retire(worker)

    def _lost(self, worker: _Worker, record: Record) -> int:
        """A worker died: fail its item, and replace it if it had loaded the model."""
        worker.process.join(timeout=5)
        code = worker.process.exitcode
        self._retire(worker)
        if not worker.ready:
            raise RuntimeError(f"a batch worker exited while loading the model (exit code {code})")
        if not worker.items:
            return 0
        for item in worker.items.values():
            row = error_row(item, f"the worker process died while it held this item (exit code {code})")
            record(item, Done(row, None, worker.name, worker.prepared))
        lost, worker.items = len(worker.items), {}
        self._spawn()
        return lost

    def _retire(self, worker: _Worker) -> None:
        if worker in self.workers:
            self.workers.remove(worker)
            self.retired.append(worker)
        worker.conn.close()

    def close(self) -> None:
        """Stop every worker: ask, then terminate those still busy (their items are lost)."""
        for worker in list(self.workers):
            try:
                worker.conn.send(None)
            except OSError:
                pass
        for worker in list(self.workers):
            worker.process.join(timeout=0.5 if not worker.items else 0)
            if worker.process.is_alive():
                worker.process.terminate()
                worker.process.join(timeout=5)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            self._retire(worker)
        for worker in self.retired:
            worker.process.join(timeout=5)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
        self.retired.clear()
