"""Bounded, cancellable work per loaded model, on the model's batcher.

Each served model has a :class:`ModelWorker`: a pool of ``max_concurrency`` threads, an
admission count bounded by ``max_concurrency + max_queue`` (a request beyond it is refused
at once with 429 and ``Retry-After``, never parked), and the model's batcher
(``engine.execution.LocalExecutor``, ``max_batch`` rows): a worker thread submits its request and forwards
the request's events; the batcher runs every submitted request as a row of one batch, so concurrent
requests share each forward pass (autoregressive families join at the next decode step and leave
when done; OmniVoice groups what arrives within ``window_s``). ``max_batch=1`` runs one request at a
time, as a server without batching would. Worker threads do the rest (audio encoding, voice-prompt
saving) outside the batch.

Keys share the queue fairly: a request waiting for a thread is taken by key, the key with the fewest
requests in progress first, then the key served longest ago (oldest first within a key), so a key that
floods the queue does not hold back another key's request behind its own; and with
``max_queue_per_key`` a key may have at most that many requests waiting (beyond it, 429 at once).
Without keys every request has the same key: first in, first out, as before.

Cancellation: a :class:`Job` carries an event that the HTTP side sets when the client goes
away; it cancels the job's row in the batch (only that row stops; the others' audio is unchanged),
and the family's progress steps check it too (the engine's ``Progress.advance``).
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from audiocpp.engine.execution import Cancelled
from audiocpp.engine.progress import Progress

from .errors import ApiError, Busy

if TYPE_CHECKING:
    from audiocpp.engine.execution import Job as BatchJob
    from audiocpp.engine.model import LoadedModel
    from audiocpp.engine.records import StreamEvent, TaskRequest

__all__ = ["CancelProgress", "Cancelled", "Job", "KeyBusy", "ModelWorker", "as_asyncio"]


class KeyBusy(ApiError):
    """One key's share of the model's queue is full: 429 with ``Retry-After``, at once (the reason in
    the metrics: ``queue``)."""

    def __init__(self, model: str, waiting: int, retry_after: int) -> None:
        super().__init__(429, f"model {model!r} is busy: this key already has {waiting} requests waiting, "
                         f"its share of the queue; retry in about {retry_after} s", code="server_busy",
                         headers={"Retry-After": str(retry_after)})


class CancelProgress(Progress):
    """The engine's progress hook, used to stop a synthesis at the family's next step."""

    def __init__(self, cancelled: threading.Event) -> None:
        super().__init__(enabled=False)
        self._cancelled = cancelled

    def advance(self, n: int = 1) -> None:
        super().advance(n)
        if self._cancelled.is_set():
            raise Cancelled("the client went away")


class Job:
    """One admitted request: its cancel flag and, when streaming, a queue into the event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.cancelled = threading.Event()
        self.loop = loop
        self.items: asyncio.Queue[Any] | None = asyncio.Queue() if loop is not None else None
        self.progress = CancelProgress(self.cancelled)
        self._batch_job: BatchJob | None = None
        self._lock = threading.Lock()
        self.emitted_bytes = 0  # audio bytes handed to the event loop so far (one producer thread)
        self.headers: dict[str, str] = {}  # extra response headers (on Ray Serve: x-audiocpp-replica)

    def cancel(self) -> None:
        with self._lock:
            self.cancelled.set()
            batch_job = self._batch_job
        if batch_job is not None:
            batch_job.cancel()

    def attach(self, batch_job: BatchJob) -> None:
        """The request's row in the batch, cancelled with the job."""
        with self._lock:
            self._batch_job = batch_job
            cancelled = self.cancelled.is_set()
        if cancelled:
            batch_job.cancel()

    def check(self) -> None:
        if self.cancelled.is_set():
            raise Cancelled("the client went away")

    def emit(self, item: Any) -> None:
        """Hand ``item`` to the streaming response (from a worker thread)."""
        if self.loop is None or self.items is None:
            return
        if isinstance(item, tuple) and len(item) > 1 and isinstance(item[1], bytes):
            self.emitted_bytes += len(item[1])
        try:
            self.loop.call_soon_threadsafe(self.items.put_nowait, item)
        except RuntimeError:  # the loop is closed: the server is shutting down
            self.cancel()


def as_asyncio(future: Future) -> asyncio.Future:
    """``future`` awaitable in the running loop. Its outcome is always retrieved, so a synthesis that ends
    (cancelled, failed) after its client went away logs no "exception was never retrieved"."""
    wrapped = asyncio.wrap_future(future)
    wrapped.add_done_callback(lambda f: f.cancelled() or f.exception())
    return wrapped


class ModelWorker:
    def __init__(self, name: str, model: LoadedModel, max_concurrency: int, max_queue: int, *,
                 max_batch: int = 1, window_s: float = 0.0, on_cancel: Callable[[], None] | None = None,
                 on_group: Callable[[int], None] | None = None,
                 on_join: Callable[[float], None] | None = None,
                 max_queue_per_key: int | None = None,
                 synthesize: Callable[..., Any] | None = None) -> None:
        self.name = name
        #: ``speech.synthesize``: what :meth:`submit_speech` runs (given by whoever builds the worker)
        self.synthesize = synthesize
        self.on_cancel = on_cancel
        self.max_concurrency = max(1, int(max_concurrency))
        self.max_queue = max(0, int(max_queue))
        self.capacity = self.max_concurrency + self.max_queue
        self.max_batch = max(1, int(max_batch))
        self.batcher = model.executor(max_batch=self.max_batch, window_s=window_s)
        self.batcher.on_group = on_group
        if on_join is not None:
            self.batcher.on_join = lambda job: on_join((job.joined or job.submitted) - job.submitted)
        self.executor = ThreadPoolExecutor(max_workers=self.max_concurrency,
                                           thread_name_prefix=f"audiocpp-{name}")
        self._count_lock = threading.Lock()
        self.admitted = 0
        self.max_queue_per_key = max_queue_per_key  # None: no per-key share (a server without keys)
        self._running = 0  # requests on a worker thread
        self._running_by: dict[str, int] = {}
        self._pending: dict[str, deque[tuple[int, Callable[[Job], Any], Job, Future]]] = {}
        self._seq = 0
        self._turn = 0  # dispatches so far; _served: the turn each key was last served at
        self._served: dict[str, int] = {}
        self._jobs: set[Job] = set()
        self._mean_wall = 1.0  # seconds a request spends in the batch, a running average for Retry-After

    @property
    def synthesizing(self) -> int:
        """Requests running now, as rows of the model's batch."""
        return self.batcher.active

    @property
    def queued(self) -> int:
        """Admitted requests not synthesizing yet (waiting for a thread or a row)."""
        return max(0, self.admitted - self.synthesizing)

    def retry_after(self) -> int:
        # The admitted requests drain max_batch at a time, each batch about one request's wall.
        waves = math.ceil((self.admitted + 1) / self.max_batch)
        return int(min(60, max(1, math.ceil(self._mean_wall * waves))))

    def waiting_of(self, key: str) -> int:
        """Requests of ``key`` admitted and waiting for a worker thread."""
        with self._count_lock:
            return len(self._pending.get(key, ()))

    def submit(self, fn: Callable[[Job], Any], job: Job, key: str = "") -> Future:
        """Run ``fn(job)`` on a worker thread (when one is free, fairly by ``key``), or raise
        :class:`Busy` (the queue is full) or :class:`KeyBusy` (``key``'s share is) at once."""
        future: Future = Future()
        with self._count_lock:
            if self.admitted >= self.capacity:
                raise Busy(self.name, self.retry_after())
            waiting = len(self._pending.get(key, ()))
            if (key and self.max_queue_per_key is not None and self._running >= self.max_concurrency
                    and waiting >= self.max_queue_per_key):
                raise KeyBusy(self.name, waiting, self.retry_after())
            self.admitted += 1
            self._jobs.add(job)
            self._seq += 1
            self._pending.setdefault(key, deque()).append((self._seq, fn, job, future))
            self._dispatch()
        return future

    def submit_speech(self, plan: Any, job: Job, voices: Any, *, keep_audio: bool = False) -> Future:
        """Synthesize a planned request (``speech.synthesize``) on a worker thread, fairly by its key; its
        future gives ``(TaskResult, encoded bytes)``. ``keep_audio``: the result's audio is needed by
        the caller (always kept here; a remote worker on Ray Serve sends it back only when asked)."""
        synthesize = self.synthesize
        assert synthesize is not None, "a ModelWorker that runs speech is given speech.synthesize"
        return self.submit(lambda j: synthesize(plan, j, self, voices), job, plan.principal.queue_key)

    def _dispatch(self) -> None:
        """Hand waiting requests to free threads: the key with the fewest requests in progress first, then
        the key served longest ago (round robin), then the oldest request (with the count lock held)."""
        while self._running < self.max_concurrency and self._pending:
            key = min(self._pending, key=lambda k: (self._running_by.get(k, 0), self._served.get(k, -1),
                                                    self._pending[k][0][0]))
            self._turn += 1
            self._served[key] = self._turn
            _, fn, job, future = self._pending[key].popleft()
            if not self._pending[key]:
                del self._pending[key]
            self._running += 1
            self._running_by[key] = self._running_by.get(key, 0) + 1
            try:
                self.executor.submit(self._run, fn, job, future, key)
            except RuntimeError:  # shut down
                self._finished(job, key)
                future.cancel()

    def _finished(self, job: Job, key: str) -> None:
        self.admitted -= 1
        self._running -= 1
        left = self._running_by.get(key, 1) - 1
        if left:
            self._running_by[key] = left
        else:
            self._running_by.pop(key, None)
        self._jobs.discard(job)

    def _run(self, fn: Callable[[Job], Any], job: Job, future: Future, key: str) -> None:
        result: Any = None
        error: BaseException | None = None
        started = future.set_running_or_notify_cancel()
        if started:
            try:
                job.check()
                result = fn(job)
            except Cancelled as cancelled:
                if self.on_cancel is not None:
                    self.on_cancel()
                error = cancelled
            except BaseException as failure:  # noqa: BLE001 - handed to the request's future
                error = failure
        with self._count_lock:  # counted free before the request's future completes
            self._finished(job, key)
            self._dispatch()
        if not started:
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def events(self, job: Job, request: TaskRequest, task: Any, mode: Any,
               session_options: dict[str, Any]) -> Iterator[StreamEvent]:
        """The request's stream events, from its row in the model's batch (on a worker thread)."""
        job.check()
        batch_job = self.batcher.submit(request, task=task, mode=mode, session_options=session_options,
                                        progress=job.progress)
        job.attach(batch_job)
        try:
            yield from batch_job.events()
        finally:
            batch_job.cancel()  # a no-op once it ended; stops the row when the caller stops reading
            if batch_job.done and batch_job.joined is not None and batch_job.error is None:
                wall = time.perf_counter() - batch_job.joined
                with self._count_lock:
                    self._mean_wall = 0.8 * self._mean_wall + 0.2 * wall

    def shutdown(self) -> None:
        """Drop queued work and stop running syntheses at their next step."""
        with self._count_lock:
            jobs = list(self._jobs)
            pending = [item for queue in self._pending.values() for item in queue]
            self._pending.clear()
            for _, _, job, _ in pending:
                self.admitted -= 1
                self._jobs.discard(job)
        for _, _, _, future in pending:
            future.cancel()
        for job in jobs:
            job.cancel()
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.batcher.close()
