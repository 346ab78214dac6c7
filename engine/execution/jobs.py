"""A submitted request: its events as they come, its result, its cancellation, and the two ways a
submission ends early: :class:`Cancelled` and :class:`Busy` (back-pressure).

Whoever runs the request calls :meth:`Job.deliver` with each of its events, from any thread; a consumer
reads them once, with ``for event in job.events()`` in a thread or ``async for event in job`` in an event
loop (the producing thread wakes the loop with ``call_soon_threadsafe``: no thread waits per request).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import AudiocppError, UsageError
from ..records import StreamEvent, TaskResult


class Cancelled(Exception):
    """The request was cancelled (by its caller, a client that went away, a deadline, a signal, shutdown).
    ``deadline_s``: set when its deadline passed (:meth:`Job.cancel_after`); ``signal``: the number of the
    signal that cancelled it (a front end's Ctrl-C or SIGTERM, :mod:`.watch`)."""

    def __init__(self, message: str = "the request was cancelled", *, deadline_s: float | None = None,
                 signal: int | None = None) -> None:
        super().__init__(message)
        self.deadline_s = deadline_s
        self.signal = signal


class Busy(AudiocppError):
    """The executor's queue is full (``reason="queue"``), or the owner's share of it is (``"owner"``):
    refused at once, never parked. ``retry_after``: seconds until a retry is likely to be admitted."""

    def __init__(self, message: str, *, retry_after: int, reason: str = "queue", waiting: int = 0) -> None:
        super().__init__(message, hint=f"retry in about {retry_after} s")
        self.retry_after = retry_after
        self.reason = reason
        self.waiting = waiting


@dataclass(repr=False)
class RowEvent:
    """An event of the request ``key``: a stream event, or the error that ended it."""

    key: Hashable
    event: StreamEvent | None = None
    error: BaseException | None = None

    @property
    def is_final(self) -> bool:
        return self.error is not None or (self.event is not None and self.event.is_final)

    def __repr__(self) -> str:
        what = self.event if self.error is None else self.error
        return f"RowEvent(key={self.key!r}, {what!r})"


class Job:
    """One submitted request (see the module docstring). ``owner``: who asked (a server's key), for the
    executor's admission policy; ``submitted``: when it was queued. Its ``executor`` is told of a cancel
    (:meth:`Executor.cancel_job`) and checks that waiting cannot deadlock (:meth:`Executor.check_wait`)."""

    def __init__(self, key: Hashable, owner: str = "", executor: Executor | None = None,
                 sink: Callable[[RowEvent], None] | None = None) -> None:
        self.key, self.owner, self._executor = key, owner, executor
        self._sink = sink  # where the events go instead of this job's own queue (a batch's shared stream)
        self.submitted = time.perf_counter()
        self._cond = threading.Condition()
        self._items: deque[RowEvent] = deque()
        self._wakers: list[asyncio.Future] = []  # event loops waiting in __aiter__ for the next event
        self.done = self.cancelled = False  # read them, never set them
        #: Without waiting: the result, or the error that ended the job, or None while it runs.
        self.outcome: TaskResult | BaseException | None = None
        self._why: Cancelled | None = None
        self._callbacks: list[Callable[[Job], None]] = []

    # -- state ----------------------------------------------------------------------------------
    @property
    def error(self) -> BaseException | None:
        """The error that ended the job (None while it runs, or when it succeeded)."""
        return self.outcome if isinstance(self.outcome, BaseException) else None

    @property
    def cancelled_by(self) -> Cancelled:
        """The error a cancelled job ends with (what :meth:`cancel` was given, else a plain one)."""
        return self._why if self._why is not None else Cancelled()

    def cancel(self, why: Cancelled | None = None) -> None:
        """Stop the request at its executor's next step (the others go on); its events end with ``why``
        (a :class:`Cancelled` saying why; a plain one by default). A no-op once it ended."""
        if self.done or self.cancelled:
            return
        self._why = why
        self.cancelled = True
        if self._executor is not None:
            self._executor.cancel_job(self)

    def cancel_after(self, seconds: float) -> None:
        """Cancel the job ``seconds`` from now unless it has ended, with ``Cancelled(..., deadline_s=N)``.
        A timer thread per job waits meanwhile: for front ends that run a few jobs, not for a server."""
        seconds = float(seconds)
        check_deadline(seconds)
        why = Cancelled(f"the deadline of {seconds:g} s passed", deadline_s=seconds)
        timer = threading.Timer(seconds, self.cancel, args=(why,))
        timer.daemon = True
        timer.name = f"audiocpp-deadline-{self.key}"
        timer.start()
        self.add_done_callback(lambda _job: timer.cancel())

    def add_done_callback(self, callback: Callable[[Job], None]) -> None:
        """``callback(job)`` when the job ends, in the thread that ends it (at once if it has ended).
        Keep it short: an in-process executor's batch waits for it."""
        with self._cond:
            if not self.done:
                self._callbacks.append(callback)
                return
        callback(self)

    # -- consuming ------------------------------------------------------------------------------
    def events(self, timeout: float | None = None) -> Iterator[StreamEvent]:
        """The request's stream events (audio pieces, then the final one) as they come; raises the
        request's error. ``timeout``: the most seconds to wait for each. Read them once."""
        if self._executor is not None:
            self._executor.check_wait()
        while True:
            with self._cond:
                if not self._items and not self._cond.wait_for(lambda: bool(self._items), timeout):
                    raise TimeoutError(f"no event of the job within {timeout} s")
                item = self._items.popleft()
            yield _unwrap(item)
            if item.is_final:
                return

    async def __aiter__(self) -> AsyncIterator[StreamEvent]:
        loop = asyncio.get_running_loop()
        while True:
            with self._cond:
                item = self._items.popleft() if self._items else None
                if item is None:
                    woken = loop.create_future()
                    self._wakers.append(woken)
            if item is None:
                await woken
                continue
            yield _unwrap(item)
            if item.is_final:
                return

    def result(self, timeout: float | None = None) -> TaskResult:
        """The final result (waits for it); raises the request's error."""
        if self._executor is not None and not self.done:
            self._executor.check_wait()
        with self._cond:
            if not self._cond.wait_for(lambda: self.done, timeout):
                raise TimeoutError(f"the job did not finish within {timeout} s")
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        assert self.outcome is not None
        return self.outcome

    # -- producing ------------------------------------------------------------------------------
    def deliver(self, event: RowEvent) -> None:
        """Hand the consumer one event (from any thread); a final one (or an error) ends the job."""
        callbacks: list[Callable[[Job], None]] = []
        with self._cond:
            if self.done:
                return
            if self._sink is None:
                self._items.append(event)
            if event.is_final:
                self.done = True
                self.outcome = event.error or event.event.result  # type: ignore[union-attr]
                callbacks, self._callbacks = self._callbacks, []
            wakers, self._wakers = self._wakers, []
            self._cond.notify_all()
        if self._sink is not None:
            self._sink(event)
        for woken in wakers:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is reading any more
                woken.get_loop().call_soon_threadsafe(lambda f=woken: f.done() or f.set_result(None))
        for callback in callbacks:
            callback(self)


def _unwrap(item: RowEvent) -> StreamEvent:
    if item.error is not None:
        raise item.error
    assert item.event is not None
    return item.event


def retry_after(mean_wall_s: float, ahead: int, per_wave: int) -> int:
    """Seconds before a request refused now would likely be admitted: the requests ahead drain
    ``per_wave`` at a time, each wave about one request's wall (1 to 60 s)."""
    waves = math.ceil((ahead + 1) / max(1, per_wave))
    return int(min(60, max(1, math.ceil(mean_wall_s * waves))))


def check_deadline(seconds: float | None) -> None:
    if seconds is not None and not float(seconds) > 0:
        raise UsageError(f"a deadline must be more than 0 s (got {float(seconds):g})",
                         hint="pass a positive number of seconds")


class Executor:
    """What every executor shares: ``submit`` is :meth:`submit_all` of one request, and at most
    :attr:`capacity` (``max_batch + max_queue``) requests are held: one more is :class:`Busy`."""

    def __init__(self, name: str, max_batch: int, max_queue: int | None) -> None:
        self.name = name
        self.max_batch = max(1, int(max_batch))
        self.max_queue = max_queue
        self.closed = False
        self._keys = itertools.count()  # each job's key, in submission order

    @property
    def capacity(self) -> int | None:
        """How many requests may be held at once (running and waiting); None: no bound."""
        return None if self.max_queue is None else self.max_batch + self.max_queue

    def submit(self, request: Any, **options: Any) -> Job:
        """Queue ``request`` and return its job at once (:meth:`submit_all`'s options); ``deadline_s``:
        cancel it that many seconds from now (:meth:`Job.cancel_after`); :class:`Busy`: the queue is full."""
        return self.submit_all([request], **options)[0]

    def submit_all(self, requests: Sequence[Any], **options: Any) -> list[Job]:
        raise NotImplementedError

    def cancel_job(self, job: Job) -> None:
        """``job`` was cancelled (:meth:`Job.cancel`): stop it at the next step."""

    def check_wait(self) -> None:
        """Raise where waiting on a job of this executor would wait forever."""

    def run(self, request: Any, **options: Any) -> TaskResult:
        """Submit and wait: the request's result."""
        return self.submit(request, **options).result()
