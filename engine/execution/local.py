"""The in-process executor: requests from any thread (or event loop) join one running batch of a model.

``model.executor()`` owns a worker thread that admits waiting requests into its :class:`~.loop.BatchLoop`
at every step (up to ``max_batch`` rows): a new request joins at the next decode step, a finished or
cancelled one leaves at once. From idle the worker first waits ``window_s``, so that requests arriving
together start together (OmniVoice's steps are few and long: one that missed the first would trail its
batch by a whole step). It holds the model's guard while it has rows (engine/guard.py).

Which waiting request joins next is the :class:`Admission` policy's: first come, first served, unless
requests carry owners (a server's keys): then the owner with the fewest requests running, then the owner
served longest ago, then the oldest request; ``max_waiting_per_owner`` bounds one owner's queue share.
"""

from __future__ import annotations

import atexit
import sys
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import UsageError
from ..guard import model_guard
from ..progress import Progress
from ..records import PreparedRequest, TaskRequest
from ..tasks import Mode, Task
from .jobs import Busy, Cancelled, Executor, Job, RowEvent, check_deadline, retry_after
from .loop import BatchLoop, RowSession


class ExecutorModel(Protocol):
    """What an executor needs of a loaded model (engine/loaded_model.py's ``LoadedModel``)."""

    family: str

    def check_session(self, task: str | Task, mode: str | Mode = Mode.OFFLINE,
                      session_options: dict[str, Any] | None = None) -> tuple[Task, Mode, dict[str, Any]]: ...

    def create_session(self, task: str | Task, mode: str | Mode = Mode.OFFLINE,
                       session_options: dict[str, Any] | None = None) -> Any: ...


class Admission:
    """Which waiting request joins next, and whether one more may wait (see the module docstring)."""

    def __init__(self, max_waiting_per_owner: int | None = None) -> None:
        self.max_waiting_per_owner = max_waiting_per_owner
        self._turn = 0
        self._served: dict[str, int] = {}

    def check(self, owner: str, waiting: int, executor: LocalExecutor) -> None:
        """Raise :class:`Busy` when ``owner`` already has its share (``waiting``) of the queue."""
        limit = self.max_waiting_per_owner
        if owner and limit is not None and executor.active >= executor.max_batch and waiting >= limit:
            raise Busy(f"{executor.name} is busy: this key already has {waiting} requests waiting, its share "
                       "of the queue", retry_after=executor.retry_after(), reason="owner", waiting=waiting)

    def pick(self, waiting: Sequence[Job], running_by: dict[str, int]) -> Job:
        """The next job to run among ``waiting`` (oldest first), ``running_by``: rows running per owner."""
        job = min(waiting, key=lambda j: (running_by.get(j.owner, 0), self._served.get(j.owner, -1), j.key))
        self._turn += 1
        self._served[job.owner] = self._turn
        return job


@dataclass
class _Submission:
    """What a job needs to join the batch: its session (or the task, mode and options to make one),
    request and progress, and the submitter's torch thread count (the worker computes with as many)."""

    job: Job
    session: RowSession | None
    session_args: tuple[Any, Any, dict[str, Any] | None]
    request: TaskRequest | PreparedRequest
    progress: Progress | None
    torch_threads: int | None = field(default_factory=lambda: _torch_threads())


def _torch_threads() -> int | None:
    """This thread's torch intra-op thread count (None before torch is imported)."""
    torch = sys.modules.get("torch")
    return None if torch is None else int(torch.get_num_threads())


def _use_torch_threads(wanted: int | None) -> None:
    """Make this (the worker's) thread compute with ``wanted`` torch threads. Torch keeps the count per
    thread once a thread has run a parallel op (OpenMP), so ``torch.set_num_threads`` in the submitter
    after the worker started would otherwise not reach it: sums split another way, other float bits."""
    if wanted is not None and _torch_threads() != wanted:
        sys.modules["torch"].set_num_threads(wanted)


#: Executors whose worker may still be running when the interpreter exits
_LIVE: weakref.WeakSet[LocalExecutor] = weakref.WeakSet()


@atexit.register
def _close_at_exit() -> None:
    """A daemon worker caught inside a torch op while the interpreter finalizes aborts the process
    ("terminate called without an active exception"): stop them all before."""
    for executor in list(_LIVE):
        executor.close()


class LocalExecutor(Executor):
    """Runs the requests submitted to one model as rows of one batch (see the module docstring)."""

    def __init__(self, model: ExecutorModel, max_batch: int = 8) -> None:
        super().__init__(f"the {model.family} model", max_batch, None)  # configure() sets the rest
        self.model = model
        self.window_s = 0.0
        self.admission = Admission()
        #: Observers (a server's metrics): every op group's size, and every join's seconds in the queue.
        self.on_group: Callable[[int], None] | None = None
        self.on_join: Callable[[float], None] | None = None
        self._cond = threading.Condition()
        self._waiting: list[_Submission] = []
        self._running: dict[Hashable, Job] = {}  # rows of the batch, and one whose session is being made
        self._sessions: dict[Hashable, RowSession] = {}
        self._mean_wall = 1.0  # seconds a request spends in the batch: a running average, for retry_after
        self._thread: threading.Thread | None = None
        _LIVE.add(self)

    def configure(self, *, max_batch: int | None = None, window_s: float | None = None,
                  max_queue: int | None = None, admission: Admission | None = None) -> None:
        with self._cond:
            if max_batch is not None:
                self.max_batch = max(1, int(max_batch))
            if window_s is not None:
                self.window_s = max(0.0, float(window_s))
            if max_queue is not None:
                self.max_queue = max(0, int(max_queue))
            if admission is not None:
                self.admission = admission

    # -- figures -----------------------------------------------------------------------------
    @property
    def active(self) -> int:
        """Requests running now (rows of the batch, and one whose session is being made)."""
        return len(self._running)

    @property
    def waiting(self) -> int:
        """Requests submitted that have not joined yet."""
        return len(self._waiting)

    def retry_after(self) -> int:
        return retry_after(self._mean_wall, self.active + self.waiting, self.max_batch)

    # -- submitting --------------------------------------------------------------------------
    def submit_all(self, requests: Sequence[TaskRequest | PreparedRequest], *, task: Any = "tts",
                   mode: Any = "offline", session_options: dict[str, Any] | None = None,
                   session: RowSession | None = None, sessions: Sequence[RowSession] | None = None,
                   progress: Progress | None = None, owner: str = "",
                   sink: Callable[[RowEvent], None] | None = None,
                   deadline_s: float | None = None) -> list[Job]:
        """Queue ``requests`` to join the batch at the same step, each in ``session`` (``sessions``: one per
        request) or a session of ``task``, ``mode`` and ``session_options``, which raise here when bad,
        as :class:`Busy` does when the queue (or ``owner``'s share of it) is full. The request itself is
        checked when it joins (its job ends with the error), unless it comes prepared (``session.prepare``).
        ``sink``: every job's events go there (tagged with its key) instead of the job's own queue."""
        args = (task, mode, session_options)
        if sessions is None and session is None:
            args = self.model.check_session(task, mode, session_options)
        picked = list(sessions) if sessions is not None else [session] * len(requests)
        check_deadline(deadline_s)
        for s in picked:
            if s is not None and getattr(s, "model", self.model) is not self.model:
                raise UsageError(f"a session must belong to the model that runs it ({self.name})")
        with self._cond:
            if self.closed:
                raise UsageError("the executor is closed", hint="model.executor() makes a new one")
            capacity = self.capacity
            if capacity is not None and self.active + self.waiting + len(requests) > capacity:
                raise Busy(f"{self.name} is busy: {self.active} requests running and {self.waiting} waiting, "
                           "its queue is full", retry_after=self.retry_after(), reason="queue",
                           waiting=self.waiting)
            if owner:
                self.admission.check(owner, sum(1 for s in self._waiting if s.job.owner == owner), self)
            jobs = []
            for request, s in zip(requests, picked):
                job = Job(next(self._keys), owner, self, sink)
                self._waiting.append(_Submission(job, s, args, request, progress))
                jobs.append(job)
                if deadline_s is not None:
                    job.cancel_after(deadline_s)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name=f"audiocpp-{self.model.family}",
                                                daemon=True)
                self._thread.start()
            self._cond.notify_all()
        return jobs

    def close(self) -> None:
        """Cancel what is queued and running, and stop the worker."""
        with self._cond:
            self.closed = True
            self._cond.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=30)

    def check_wait(self) -> None:
        """Waiting on a job where its batch cannot run would wait forever: in the worker's own thread (a
        done-callback, a row program), or in a thread that holds the model's guard (a family hook)."""
        if threading.current_thread() is self._thread or model_guard(self.model).held_here:
            raise UsageError(f"waiting on a job of {self.name} here would wait forever (this thread runs "
                             "or holds the model)", hint="wait from another thread, or read the job's "
                             "outcome in a done-callback")

    def cancel_job(self, job: Job) -> None:
        """A waiting job leaves the queue at once (its place is free); a running one at the next step."""
        with self._cond:
            waiting = next((s for s in self._waiting if s.job is job), None)
            if waiting is not None:
                self._waiting.remove(waiting)
            self._cond.notify_all()
        if waiting is not None:
            job.deliver(RowEvent(job.key, error=job.cancelled_by))

    # -- the worker ----------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._waiting or self.closed)
                if self.closed:
                    self._fail_waiting(Cancelled("the executor was closed"))
                    return
                window = self.window_s
            if window > 0:
                time.sleep(window)
            with model_guard(self.model).held(what=self.name):
                self._run_batch()

    def _run_batch(self) -> None:
        loop = BatchLoop(self.on_group)
        try:
            while True:
                self._admit(loop)
                if not len(loop):
                    return
                closed = Cancelled("the executor was closed") if self.closed else None
                for key, job in list(self._running.items()):
                    if closed or job.cancelled:
                        loop.cancel(key, closed or job.cancelled_by)
                for event in loop.step():
                    job = self._running.pop(event.key) if event.is_final else self._running[event.key]
                    if event.event is not None and event.is_final:  # for retry_after
                        self._mean_wall = 0.8 * self._mean_wall + 0.2 * event.event.result.metrics.wall_s
                    job.deliver(event)
        except BaseException as error:  # the loop itself broke: every running request fails with it
            for job in self._running.values():
                job.deliver(RowEvent(job.key, error=error))
            self._running.clear()
            raise
        finally:
            loop.close()

    def _admit(self, loop: BatchLoop) -> None:
        """Move waiting requests into the batch while it has room. A request's session is made outside the
        lock (a new compute mode may build a network for seconds): submitting, cancelling and the figures,
        which a server's event loop reads, never wait for it."""
        while True:
            with self._cond:
                if self.closed:
                    self._fail_waiting(Cancelled("the executor was closed"))
                    return
                if not self._waiting or len(loop) >= self.max_batch:
                    return
                running_by = Counter(j.owner for j in self._running.values())
                job = self.admission.pick([s.job for s in self._waiting], running_by)
                submission = next(s for s in self._waiting if s.job is job)
                self._waiting.remove(submission)
                self._running[job.key] = job  # running while its session is made (the bound stays exact)
            try:
                _use_torch_threads(submission.torch_threads)  # before a new session's own `threads` option
                session = submission.session or self._session(submission)
            except Exception as error:  # noqa: BLE001 - the job's own failure
                with self._cond:
                    del self._running[job.key]
                job.deliver(RowEvent(job.key, error=error))
                continue
            queued_s = time.perf_counter() - job.submitted
            loop.add(job.key, session, submission.request, progress=submission.progress, queued_s=queued_s)
            if self.on_join is not None:
                self.on_join(queued_s)

    def _session(self, submission: _Submission) -> RowSession:
        task, mode, options = submission.session_args
        key = (task, mode, tuple(sorted((k, repr(v)) for k, v in (options or {}).items())))
        session = self._sessions.get(key)
        if session is None:
            session = self.model.create_session(task, mode, options)
            if len(self._sessions) >= 16:
                self._sessions.pop(next(iter(self._sessions)))
            self._sessions[key] = session
        return session

    def _fail_waiting(self, error: BaseException) -> None:
        waiting, self._waiting = self._waiting, []
        for submission in waiting:
            submission.job.deliver(RowEvent(submission.job.key, error=error))
