"""Bounded, cancellable work per loaded model.

Each served model has a :class:`ModelWorker`: a pool of ``max_concurrency`` threads, an
admission count bounded by ``max_concurrency + max_queue`` (a request beyond it is refused
at once with 429 and ``Retry-After``, never parked), and one synthesis lock.

Why a lock: sessions of one ``LoadedModel`` share state that is not safe across threads —
VoxCPM2's AR loop owns static KV caches per model and dtype, models build per-dtype copies
of their networks lazily, and the engine's reference cache is an unsynchronized LRU. So the
synthesis of one model (session creation and the whole ``session.stream``) runs under its
lock: one at a time per model, different models in parallel. Worker threads do the rest
(audio encoding, voice-prompt saving) outside it.

Cancellation: a :class:`Job` carries an event that the HTTP side sets when the client goes
away. The worker checks it while waiting for the lock, between stream events (then closes
the session's generator), and at every progress step the family reports (the engine's
``Progress.advance``), so an offline synthesis stops mid-way too.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from audiocpp.engine.progress import Progress

from .errors import Busy


class Cancelled(Exception):
    """The client went away; the synthesis was stopped."""


class CancelProgress(Progress):
    """The engine's progress hook, used to stop a synthesis at the family's next step."""

    def __init__(self, cancelled: threading.Event) -> None:
        super().__init__(enabled=False)
        self._cancelled = cancelled

    def advance(self, n: int = 1) -> None:
        super().advance(n)
        if self._cancelled.is_set():
            raise Cancelled()


class Job:
    """One admitted request: its cancel flag and, when streaming, a queue into the event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.cancelled = threading.Event()
        self.loop = loop
        self.items: asyncio.Queue[Any] | None = asyncio.Queue() if loop is not None else None
        self.progress = CancelProgress(self.cancelled)

    def cancel(self) -> None:
        self.cancelled.set()

    def check(self) -> None:
        if self.cancelled.is_set():
            raise Cancelled()

    def emit(self, item: Any) -> None:
        """Hand ``item`` to the streaming response (from a worker thread)."""
        if self.loop is None or self.items is None:
            return
        try:
            self.loop.call_soon_threadsafe(self.items.put_nowait, item)
        except RuntimeError:  # the loop is closed: the server is shutting down
            self.cancel()


class ModelWorker:
    def __init__(self, name: str, max_concurrency: int, max_queue: int,
                 on_cancel: Callable[[], None] | None = None) -> None:
        self.name = name
        self.on_cancel = on_cancel
        self.max_concurrency = max(1, int(max_concurrency))
        self.max_queue = max(0, int(max_queue))
        self.capacity = self.max_concurrency + self.max_queue
        self.executor = ThreadPoolExecutor(max_workers=self.max_concurrency, thread_name_prefix=f"audiocpp-{name}")
        self.lock = threading.Lock()
        self._count_lock = threading.Lock()
        self.admitted = 0
        self.synthesizing = 0
        self._jobs: set[Job] = set()
        self._mean_wall = 1.0  # seconds per request, a running average for Retry-After

    @property
    def queued(self) -> int:
        """Admitted requests not synthesizing yet (waiting for a thread or the lock)."""
        return max(0, self.admitted - self.synthesizing)

    def retry_after(self) -> int:
        # One synthesis at a time per model: the wait is about the admitted requests' work.
        return int(min(60, max(1, math.ceil(self._mean_wall * (self.admitted + 1)))))

    def submit(self, fn: Callable[[Job], Any], job: Job) -> Future:
        """Run ``fn(job)`` on a worker thread, or raise :class:`Busy` at once when full."""
        with self._count_lock:
            if self.admitted >= self.capacity:
                raise Busy(self.name, self.retry_after())
            self.admitted += 1
            self._jobs.add(job)
        try:
            return self.executor.submit(self._run, fn, job)
        except RuntimeError:  # shut down
            with self._count_lock:
                self.admitted -= 1
                self._jobs.discard(job)
            raise

    def _run(self, fn: Callable[[Job], Any], job: Job) -> Any:
        try:
            job.check()
            return fn(job)
        except Cancelled:
            if self.on_cancel is not None:
                self.on_cancel()
            raise
        finally:
            with self._count_lock:
                self.admitted -= 1
                self._jobs.discard(job)

    @contextmanager
    def synthesis(self, job: Job) -> Iterator[None]:
        """Hold the model's synthesis lock (waiting while the job is still wanted)."""
        while not self.lock.acquire(timeout=0.05):
            job.check()
        t0 = time.perf_counter()
        with self._count_lock:
            self.synthesizing += 1
        try:
            job.check()
            yield
        finally:
            with self._count_lock:
                self.synthesizing -= 1
                self._mean_wall = 0.8 * self._mean_wall + 0.2 * (time.perf_counter() - t0)
            self.lock.release()

    def shutdown(self) -> None:
        """Drop queued work and stop running syntheses at their next step."""
        with self._count_lock:
            jobs = list(self._jobs)
        for job in jobs:
            job.cancel()
        self.executor.shutdown(wait=False, cancel_futures=True)
