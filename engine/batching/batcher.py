"""The batcher: requests from any thread join one running batch of a model.

``model.batcher(max_batch=8)`` owns a worker thread. :meth:`Batcher.submit` queues a request and
returns a :class:`BatchJob` at once; the worker admits waiting requests into its
:class:`~.loop.BatchLoop` at every step (up to ``max_batch`` rows), so a new request joins the running
batch at its next decode step and a finished or cancelled one leaves at once, without holding back
the others. When the worker starts from idle it first waits ``window_s`` so that requests arriving
together start together (OmniVoice's steps are few and long: a request that misses the first one
would trail its batch by a whole step). The worker holds the model's guard while it has rows, so
``session.run`` from other threads and the batcher take turns (engine/guard.py).
"""

from __future__ import annotations

import atexit
import queue
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Hashable, Iterator
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..guard import model_guard
from .loop import BatchLoop, Cancelled, RowEvent

if TYPE_CHECKING:
    from ..model import LoadedModel
    from ..progress import Progress
    from ..records import PreparedRequest, StreamEvent, TaskRequest, TaskResult
    from ..session import Session


class BatchJob:
    """A submitted request: its events as they come, its result, its cancellation."""

    def __init__(self, batcher: Batcher, key: int, session_key: Hashable, session: Session | None,
                 session_args: tuple[Any, Any, dict[str, Any] | None], request: TaskRequest | PreparedRequest,
                 progress: Progress | None) -> None:
        self.batcher, self.key = batcher, key
        self.session_key, self.session, self.session_args = session_key, session, session_args
        self.request, self.progress = request, progress
        self.submitted = time.perf_counter()
        self.joined: float | None = None
        self._events: queue.Queue[RowEvent] = queue.Queue()
        self._done = threading.Event()
        self._cancel = threading.Event()
        self._result: TaskResult | None = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[BatchJob], None]] = []
        self._callback_lock = threading.Lock()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def cancel(self) -> None:
        """Stop this request at the batch's next step (the others go on); its events end with
        :class:`~.loop.Cancelled`."""
        if not self._done.is_set():
            self._cancel.set()
            self.batcher._wake()

    def _check_thread(self) -> None:
        if model_guard(self.batcher.model).held_here:
            raise UsageError("waiting on a batch job while this thread holds the model (an open stream of "
                             "it) would wait forever", hint="finish or close the stream first")

    def events(self, timeout: float | None = None) -> Iterator[StreamEvent]:
        """The request's stream events (audio pieces, then the final one) as its row produces them;
        raises the request's error. ``timeout``: the most seconds to wait for each event."""
        self._check_thread()
        while True:
            try:
                item = self._events.get(timeout=timeout)
            except queue.Empty:
                raise TimeoutError(f"no event of the batch job within {timeout} s") from None
            if item.error is not None:
                raise item.error
            assert item.event is not None
            yield item.event
            if item.event.is_final:
                return

    def result(self, timeout: float | None = None) -> TaskResult:
        """The final result (waits for it); raises the request's error."""
        self._check_thread()
        if not self._done.wait(timeout):
            raise TimeoutError(f"the batch job did not finish within {timeout} s")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def add_done_callback(self, callback: Callable[[BatchJob], None]) -> None:
        """Call ``callback(job)`` when the job ends (its result or error is set), in the batcher's
        thread; at once when it has already ended. Keep it short: the batch waits for it."""
        with self._callback_lock:
            if not self._done.is_set():
                self._callbacks.append(callback)
                return
        callback(self)

    @property
    def error(self) -> BaseException | None:
        """The error that ended the job (None while running or when it succeeded)."""
        return self._error

    @property
    def outcome(self) -> TaskResult | BaseException | None:
        """Without waiting: the result, or the error that ended the job, or None while it runs
        (what a done-callback reads)."""
        return self._error if self._error is not None else self._result

    def _deliver(self, event: RowEvent) -> None:
        self._events.put(event)
        if event.error is None and not (event.event is not None and event.event.is_final):
            return
        with self._callback_lock:
            if event.error is not None:
                self._error = event.error
            else:
                self._result = event.event.result  # type: ignore[union-attr]
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)


#: Batchers whose worker may still be running when the interpreter exits
_LIVE: weakref.WeakSet[Batcher] = weakref.WeakSet()


@atexit.register
def _close_at_exit() -> None:
    """Stop every batcher's worker before the interpreter finalizes: a daemon worker caught inside a
    torch op while C++ statics are destroyed aborts the process ("terminate called without an active
    exception") after a script that used ``model.batcher()`` has done its work."""
    for batcher in list(_LIVE):
        batcher.close()


class Batcher:
    """Runs the requests submitted to one model as rows of one batch (see the module docstring)."""

    def __init__(self, model: LoadedModel, max_batch: int = 8, window_s: float = 0.0) -> None:
        self.model = model
        self.max_batch = max(1, int(max_batch))
        self.window_s = max(0.0, float(window_s))
        self.closed = False
        #: Observers (for the server's metrics): every op group's size, and every join's wait.
        self.on_group: Callable[[int], None] | None = None
        self.on_join: Callable[[BatchJob], None] | None = None
        self._cond = threading.Condition()
        self._waiting: deque[BatchJob] = deque()
        self._running: dict[int, BatchJob] = {}
        self._sessions: dict[Hashable, Session] = {}
        self._next_key = 0
        self._thread: threading.Thread | None = None
        _LIVE.add(self)

    def configure(self, *, max_batch: int | None = None, window_s: float | None = None) -> None:
        with self._cond:
            if max_batch is not None:
                self.max_batch = max(1, int(max_batch))
            if window_s is not None:
                self.window_s = max(0.0, float(window_s))

    @property
    def active(self) -> int:
        """Requests running now (rows of the batch)."""
        return len(self._running)

    @property
    def waiting(self) -> int:
        """Requests submitted that have not joined yet."""
        return len(self._waiting)

    # -- submitting --------------------------------------------------------------------------
    def submit(self, request: TaskRequest | PreparedRequest, *, task: Any = "tts", mode: Any = "offline",
               session_options: dict[str, Any] | None = None, session: Session | None = None,
               progress: Progress | None = None) -> BatchJob:
        """Queue ``request`` (a task, mode and session options of this model, or a ``session`` of
        it) and return its job at once. Bad task, mode or session options raise here; everything
        about the request itself (text, options, references) is checked when it joins and ends its
        job with the error, unless it comes prepared (``session.prepare``, with its ``session``)."""
        if session is not None:
            if session.model is not self.model:
                raise UsageError("the session belongs to another model than this batcher's")
            session_key: Hashable = ("session", id(session))
        else:
            task, mode, options = self.model.check_session(task, mode, session_options)
            session_key = (task, mode, tuple(sorted((k, repr(v)) for k, v in options.items())))
            session_options = options
        with self._cond:
            if self.closed:
                raise UsageError("the batcher is closed")
            job = BatchJob(self, self._next_key, session_key, session, (task, mode, session_options), request,
                           progress)
            self._next_key += 1
            self._waiting.append(job)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work,
                                                name=f"audiocpp-batcher-{self.model.family}", daemon=True)
                self._thread.start()
            self._cond.notify_all()
        return job

    def run(self, request: TaskRequest, **kwargs: Any) -> TaskResult:
        """Submit and wait: the request's result (it joins whatever batch is running)."""
        return self.submit(request, **kwargs).result()

    def close(self) -> None:
        """Cancel what is queued and running, and stop the worker."""
        with self._cond:
            self.closed = True
            self._cond.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=30)

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    # -- the worker ----------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self.closed:
                    self._cond.wait()
                if self.closed:
                    self._fail_waiting(Cancelled("the batcher was closed"))
                    return
                window = self.window_s
            if window > 0:
                time.sleep(window)
            with model_guard(self.model).held(what=f"the {self.model.family} model"):
                self._run_batch()

    def _run_batch(self) -> None:
        loop = BatchLoop()
        loop.on_group = self.on_group
        try:
            while True:
                self._admit(loop)
                if not len(loop):
                    return
                for key, job in list(self._running.items()):
                    if job.cancelled or self.closed:
                        loop.cancel(key)
                for event in loop.step():
                    job = self._running.get(event.key)  # type: ignore[arg-type]
                    if job is None:
                        continue
                    job._deliver(event)
                    if event.is_final:
                        del self._running[event.key]  # type: ignore[arg-type]
        except BaseException as error:  # the loop itself broke: every running request fails with it
            for job in self._running.values():
                job._deliver(RowEvent(job.key, error=error))
            self._running.clear()
            raise
        finally:
            loop.close()

    def _admit(self, loop: BatchLoop) -> None:
        with self._cond:
            if self.closed:
                self._fail_waiting(Cancelled("the batcher was closed"))
                return
            while self._waiting and len(loop) < self.max_batch:
                job = self._waiting.popleft()
                if job.cancelled:
                    job._deliver(RowEvent(job.key, error=Cancelled("the request was cancelled")))
                    continue
                try:
                    session = job.session or self._session(job)
                except Exception as error:  # noqa: BLE001 - the job's own failure
                    job._deliver(RowEvent(job.key, error=error))
                    continue
                job.joined = time.perf_counter()
                self._running[job.key] = job
                loop.add(job.key, session, job.request, progress=job.progress,
                         queued_s=job.joined - job.submitted)
                if self.on_join is not None:
                    self.on_join(job)

    def _session(self, job: BatchJob) -> Session:
        session = self._sessions.get(job.session_key)
        if session is None:
            task, mode, options = job.session_args
            session = self.model.create_session(task, mode, options)
            if len(self._sessions) >= 16:
                self._sessions.pop(next(iter(self._sessions)))
            self._sessions[job.session_key] = session
        return session

    def _fail_waiting(self, error: BaseException) -> None:
        while self._waiting:
            job = self._waiting.popleft()
            job._deliver(RowEvent(job.key, error=error))
