"""The executor over worker processes (spawned: torch and fork do not mix): each loads the model with
``load`` (picklable) and runs a :class:`~.local.LocalExecutor` on it.

:meth:`ProcessExecutor.submit` sends the request to a worker over its pipe (the one given, else the least
loaded); its events come back over the same pipe, and ``job.cancel()`` sends the cancellation. A worker
that dies fails its jobs with :class:`WorkerDied` and is replaced. Workers ignore SIGINT (the driver
decides what Ctrl-C stops) and exit when the driver's end of their pipe closes.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import pickle
import queue
import signal
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from ..errors import AudiocppError, UsageError
from .jobs import Busy, Cancelled, Executor, Job, RowEvent, check_deadline, retry_after


class WorkerDied(RuntimeError):
    """The worker process that ran a request died (killed, out of memory, a crash in native code)."""


def _portable(error: BaseException) -> BaseException:
    """``error`` as it can cross a pipe: itself when it pickles back whole, else the same words."""
    with contextlib.suppress(Exception):  # an error whose class cannot be rebuilt from its args
        back = pickle.loads(pickle.dumps(error))
        if type(back) is type(error) and str(back) == str(error):
            return error
    if isinstance(error, AudiocppError):
        return AudiocppError(error.message, hint=error.hint)
    return RuntimeError(f"{type(error).__name__}: {error}")


def _worker_main(conn: Connection, load: Callable[[], Any], max_batch: int,
                 probe: Callable[[Any], Any] | None) -> None:
    """A worker: load the model, then run what the driver sends on its executor; events go back."""
    from .local import LocalExecutor

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    lock = threading.Lock()

    def send(message: tuple) -> None:
        with lock, contextlib.suppress(OSError):  # the driver is gone
            conn.send(message)

    try:
        model = load()
    except BaseException as error:  # noqa: BLE001 - said to the driver, which raises it
        send(("load_error", _portable(error)))
        return
    executor = LocalExecutor(model, max_batch=max_batch)
    jobs: dict[Hashable, Job] = {}  # a job's cancellation comes after its submission (one sender, in order)

    def forward(event: RowEvent) -> None:
        if event.is_final:
            jobs.pop(event.key, None)
            if probe is not None:  # the worker's state as this job ends (before its last event)
                send(("state", probe(model)))
        error = None if event.error is None else _portable(event.error)
        send(("event", event.key, event.event, error))

    send(("ready",))
    try:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                return
            if message is None:
                return
            if message[0] == "submit":
                _, key, request, kwargs = message
                try:
                    job = executor.submit_all([request], sink=lambda e, key=key: forward(
                        RowEvent(key, e.event, e.error)), **kwargs)[0]
                except Exception as error:  # noqa: BLE001 - a bad session or option: the job's error
                    send(("event", key, None, _portable(error)))
                    continue
                jobs[key] = job
            elif message[0] == "cancel" and message[1] in jobs:
                jobs[message[1]].cancel(message[2])
    finally:
        executor.close()


@dataclass
class _Worker:
    name: str
    process: Any
    conn: Connection
    ready: bool = False
    jobs: dict[Hashable, Job] = field(default_factory=dict)


class ProcessExecutor(Executor):
    """Requests run on ``workers`` processes, each with the model ``load()`` gives. ``on_ready(name)``:
    called (in the reader thread) when a worker has loaded it; ``probe(model)``: picklable, run in a
    worker as each of its jobs ends, kept as its :meth:`state` (e.g. how many voices it has prepared)."""

    def __init__(self, load: Callable[[], Any], workers: int = 1, *, max_batch: int = 8,
                 max_queue: int | None = None, name: str = "the worker processes",
                 on_ready: Callable[[str], None] | None = None,
                 probe: Callable[[Any], Any] | None = None) -> None:
        super().__init__(name, max_batch, max_queue)
        self.load, self.size = load, max(1, int(workers))
        self.on_ready, self.probe = on_ready, probe
        self._state: dict[str, Any] = {}
        self.load_error: BaseException | None = None
        self._context = multiprocessing.get_context("spawn")
        self._lock = threading.RLock()
        self._workers: list[_Worker] = []
        self._spawned = 0
        self._readers: list[threading.Thread] = []  # one per worker: it reads the worker's pipe
        # every message to a worker goes through one sender thread: a SimpleQueue's put never blocks and
        # may be called from a signal handler (Ctrl-C cancels watched jobs while the main thread sends)
        self._outbox: queue.SimpleQueue[tuple[_Worker | None, tuple | None] | None] = queue.SimpleQueue()
        self._sender = threading.Thread(target=self._deliver, name="audiocpp-pool-sender", daemon=True)
        self._sender.start()
        for _ in range(self.size):
            self._spawn()

    # -- figures ----------------------------------------------------------------------------
    @property
    def workers(self) -> list[str]:
        """The names of the live workers, in the order ``submit(worker=i)`` numbers them."""
        with self._lock:
            return [w.name for w in self._workers]

    @property
    def active(self) -> int:
        with self._lock:
            return sum(len(w.jobs) for w in self._workers)

    @property
    def pids(self) -> list[int]:
        """The process ids of the live workers (numbered as :attr:`workers`)."""
        with self._lock:
            return [int(w.process.pid) for w in self._workers]

    def state(self, name: str) -> Any:
        """The last value of ``probe`` in the worker ``name`` (None before its first job ended)."""
        return self._state.get(name)

    # -- submitting -------------------------------------------------------------------------
    def submit_all(self, requests: Sequence[Any], *, task: Any = "tts", mode: Any = "offline",
                   session_options: dict[str, Any] | None = None, owner: str = "",
                   deadline_s: float | None = None, worker: int | None = None) -> list[Job]:
        """Send ``requests`` together to a worker (the ``worker``-th, else the least loaded), to join its
        batch at the same step; :class:`Busy` when it would hold more than :attr:`capacity`. Bad task,
        mode or options end the jobs with the error (the worker checks them, with the model)."""
        check_deadline(deadline_s)
        kwargs = {"task": task, "mode": mode, "session_options": session_options, "owner": owner,
                  "deadline_s": deadline_s}
        with self._lock:
            if self.closed:
                raise UsageError(f"{self.name} are closed", hint="make a new ProcessExecutor")
            if self.load_error is not None:
                raise self.load_error
            if not self._workers:
                raise UsageError(f"{self.name} have all stopped", hint="make a new ProcessExecutor")
            chosen = (min(self._workers, key=lambda w: len(w.jobs)) if worker is None
                      else self._workers[worker])
            if self.capacity is not None and len(chosen.jobs) + len(requests) > self.capacity:
                raise Busy(f"{chosen.name} is busy: it holds {len(chosen.jobs)} requests, its queue is full",
                           retry_after=retry_after(1.0, len(chosen.jobs), self.max_batch), reason="queue",
                           waiting=max(0, len(chosen.jobs) - self.max_batch))
            jobs = [Job(next(self._keys), owner, self) for _ in requests]
            chosen.jobs.update((job.key, job) for job in jobs)
            for job, request in zip(jobs, requests):
                self._outbox.put((chosen, ("submit", job.key, request, kwargs)))
        return jobs

    def cancel_job(self, job: Job) -> None:
        self._outbox.put((None, ("cancel", job.key, job.cancelled_by)))  # no lock: a signal handler calls it

    def _deliver(self) -> None:
        while (item := self._outbox.get()) is not None:
            worker, message = item
            if worker is None:  # a cancellation, for the worker that holds the job (if it still runs)
                with self._lock:
                    worker = next((w for w in self._workers if message[1] in w.jobs), None)
                if worker is None:
                    continue
            with contextlib.suppress(OSError, ValueError):  # its pipe is closed: the reader fails its jobs
                worker.conn.send(message)

    # -- the readers ------------------------------------------------------------------------
    def _read(self, worker: _Worker) -> None:
        """Hand ``worker``'s events to their jobs until its pipe closes: it died, or was closed (what it
        sent before is read first)."""
        while True:
            try:
                message = worker.conn.recv()
            except (EOFError, OSError):
                self._lost(worker)
                return
            if message[0] == "event":
                _, key, event, error = message
                with self._lock:
                    final = error is not None or event.is_final
                    job = worker.jobs.pop(key, None) if final else worker.jobs.get(key)
                if job is not None:
                    job.deliver(RowEvent(key, event, error))
            elif message[0] == "state":
                self._state[worker.name] = message[1]
            elif message[0] == "ready":
                worker.ready = True
                if self.on_ready is not None:
                    self.on_ready(worker.name)
            elif message[0] == "load_error":
                with self._lock:
                    self.load_error = message[1]
                self._lost(worker, replace=False)
                return

    def _lost(self, worker: _Worker, replace: bool = True) -> None:
        """A worker ended: its jobs fail with :class:`WorkerDied`; it is replaced if it had loaded."""
        worker.process.join(timeout=5)
        code = worker.process.exitcode
        with self._lock:
            if not worker.ready and self.load_error is None:
                self.load_error = WorkerDied(f"the worker process {worker.name} exited while loading the "
                                             f"model (exit code {code})")
            index = self._workers.index(worker) if worker in self._workers else None
            if index is not None:
                self._workers.remove(worker)
            jobs, worker.jobs = list(worker.jobs.values()), {}
            if replace and worker.ready and not self.closed:
                self._spawn(index)
        worker.conn.close()
        error = self.load_error if not worker.ready and self.load_error is not None else WorkerDied(
            f"the worker process {worker.name} died while it ran this request (exit code {code})")
        for job in jobs:
            job.deliver(RowEvent(job.key, error=error))

    def _spawn(self, index: int | None = None) -> None:
        """A new worker, at ``index`` (a dead one's place) or last."""
        parent, child = self._context.Pipe()
        self._spawned += 1
        name = f"audiocpp-worker-{self._spawned}"
        process = self._context.Process(target=_worker_main,
                                        args=(child, self.load, self.max_batch, self.probe),
                                        name=name, daemon=True)
        process.start()
        child.close()
        worker = _Worker(name, process, parent)
        self._workers.insert(len(self._workers) if index is None else index, worker)
        reader = threading.Thread(target=self._read, args=(worker,), name=f"{name}-reader", daemon=True)
        self._readers.append(reader)
        reader.start()

    # -- closing ----------------------------------------------------------------------------
    def close(self, timeout: float = 5.0) -> None:
        """Ask each worker to finish (their jobs end cancelled); terminate those left after ``timeout`` s."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            workers = list(self._workers)
        for worker in workers:
            self._outbox.put((worker, None))
        for worker in workers:
            worker.process.join(timeout=timeout)
            for stop in (worker.process.terminate, worker.process.kill):
                if worker.process.is_alive():
                    stop()
                    worker.process.join(timeout=5)
        self._outbox.put(None)
        self._sender.join(timeout=10)
        for reader in list(self._readers):
            reader.join(timeout=10)
        with self._lock:
            left = [job for w in self._workers for job in w.jobs.values()]
            self._workers.clear()
        for job in left:
            job.deliver(RowEvent(job.key, error=Cancelled("the worker processes were closed")))
