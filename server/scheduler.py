"""Bounded, cancellable work per loaded model, on the model's executor, in the server's event loop.

Each served model has a :class:`ModelWorker` over ``model.executor()``: every admitted request is a row of
one batch (``max_batch=1``: one request at a time). At most ``min(max_batch, max_concurrency)`` rows run
at once and at most ``max_concurrency + max_queue`` requests are admitted; one more is refused at once
with 429 and ``Retry-After``. Fairness between keys is the executor's ``Admission`` (owner = the
request's key; ``max_queue_per_key``: a key's share of the queue, beyond it :class:`KeyBusy`).

No thread per request: a request is an asyncio task that reads its row's events with ``async for``.
A client that goes away cancels its :class:`Job`, which cancels the engine job: its row leaves the
batch at the next step (the others' audio is unchanged).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from audiocpp.engine.execution import Admission, Cancelled
from audiocpp.engine.execution import Busy as EngineBusy

from .errors import ApiError, Busy

if TYPE_CHECKING:
    from audiocpp.engine.execution import Job as EngineJob
    from audiocpp.engine.loaded_model import LoadedModel
    from audiocpp.engine.records import TaskResult

__all__ = ["Cancelled", "Job", "KeyBusy", "ModelWorker", "as_asyncio"]


class KeyBusy(ApiError):
    """One key's share of the model's queue is full: 429 with ``Retry-After`` (metrics reason: ``queue``)."""

    def __init__(self, model: str, waiting: int, retry_after: int) -> None:
        super().__init__(429, f"model {model!r} is busy: this key already has {waiting} requests waiting, "
                         f"its share of the queue; retry in about {retry_after} s", code="server_busy",
                         headers={"Retry-After": str(retry_after)})


class Job:
    """One admitted request as the HTTP side sees it: its cancel flag and, when streaming (given its event
    loop), a queue of its pieces. Cancelling it cancels its engine job (:meth:`attach`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.cancelled = threading.Event()
        self.items: asyncio.Queue[Any] | None = asyncio.Queue() if loop is not None else None
        self._engine_job: EngineJob | None = None
        self.emitted_bytes = 0  # audio bytes handed to the response so far
        self.headers: dict[str, str] = {}  # extra response headers (on Ray Serve: x-audiocpp-replica)

    def cancel(self) -> None:
        self.cancelled.set()
        if self._engine_job is not None:
            self._engine_job.cancel()

    def attach(self, engine_job: EngineJob) -> None:
        """The request's row in the model's executor, cancelled with the job."""
        self._engine_job = engine_job
        if self.cancelled.is_set():
            engine_job.cancel()

    def emit(self, item: Any) -> None:
        """Hand ``item`` to the streaming response (in its event loop: the synthesis reads its engine job
        there, ``speech.synthesize``)."""
        if self.items is None:
            return
        if isinstance(item, tuple) and len(item) > 1 and isinstance(item[1], bytes):
            self.emitted_bytes += len(item[1])
        self.items.put_nowait(item)


def as_asyncio(future: Future | asyncio.Future) -> asyncio.Future:
    """``future`` awaitable in the running loop. Its outcome is always retrieved, so a synthesis that ends
    (cancelled, failed) after its client went away logs no "exception was never retrieved"."""
    wrapped = asyncio.wrap_future(future)  # an asyncio future (a task) is itself
    wrapped.add_done_callback(lambda f: f.cancelled() or f.exception())
    return wrapped


Synthesize = Callable[..., Coroutine[Any, Any, "tuple[TaskResult, bytes]"]]


class ModelWorker:
    """A served model's admission and requests, as asyncio tasks over its executor (module docstring)."""

    def __init__(self, name: str, model: LoadedModel, max_concurrency: int, max_queue: int, *,
                 max_batch: int = 1, window_s: float = 0.0, on_cancel: Callable[[], None] | None = None,
                 on_group: Callable[[int], None] | None = None,
                 on_join: Callable[[float], None] | None = None,
                 max_queue_per_key: int | None = None,
                 synthesize: Synthesize | None = None) -> None:
        self.name = name
        #: ``speech.synthesize``: what :meth:`submit_speech` runs (given by whoever builds the worker)
        self.synthesize = synthesize
        self.on_cancel = on_cancel
        self.max_batch = max(1, int(max_batch))
        self.capacity = max(1, int(max_concurrency)) + max(0, int(max_queue))
        rows = min(self.max_batch, max(1, int(max_concurrency)))
        self.executor = model.executor(max_batch=rows, window_s=window_s)
        self.executor.configure(max_queue=self.capacity - rows, admission=Admission(max_queue_per_key))
        self.executor.name = f"model {name!r}"
        self.executor.on_group, self.executor.on_join = on_group, on_join
        self._tasks: set[asyncio.Task] = set()

    @property
    def synthesizing(self) -> int:
        """Requests running now, as rows of the model's batch."""
        return self.executor.active

    @property
    def queued(self) -> int:
        """Admitted requests waiting for a row."""
        return self.executor.waiting

    def submit_speech(self, plan: Any, job: Job, voices: Any, *, keep_audio: bool = False) -> asyncio.Future:
        """Queue a planned request on the model's executor (owner: its key) and synthesize it in an asyncio
        task (``speech.synthesize``) giving ``(TaskResult, encoded bytes)``; :class:`Busy` or
        :class:`KeyBusy` at once. ``keep_audio``: always kept here (a Ray Serve replica asks for it)."""
        synthesize = self.synthesize
        assert synthesize is not None, "a ModelWorker that runs speech is given speech.synthesize"
        loop = asyncio.get_running_loop()
        try:
            engine_job = self.executor.submit(plan.request, task=plan.task, mode=plan.mode,
                                             session_options=plan.served.session_options,
                                             owner=plan.principal.queue_key)
        except EngineBusy as busy:
            if busy.reason == "owner":
                raise KeyBusy(self.name, busy.waiting, busy.retry_after) from None
            raise Busy(self.name, busy.retry_after) from None
        except Exception as error:  # noqa: BLE001 - the request's own failure, through its future
            failed = loop.create_future()
            failed.set_exception(Cancelled("the server is shutting down") if self.executor.closed else error)
            return failed
        job.attach(engine_job)
        task = loop.create_task(synthesize(plan, job, engine_job, voices))
        self._tasks.add(task)
        task.add_done_callback(lambda _: self._ended(task, engine_job))
        return task

    def _ended(self, task: asyncio.Task, engine_job: EngineJob) -> None:
        """A synthesis ended: its row stops if the task stopped early (a no-op once the row ended), and
        one that ended :class:`Cancelled` is counted."""
        self._tasks.discard(task)
        engine_job.cancel()
        if self.on_cancel is not None and not task.cancelled() and isinstance(task.exception(), Cancelled):
            self.on_cancel()

    def shutdown(self) -> None:
        """Drop queued work and stop running syntheses at their next step (their jobs end Cancelled)."""
        self.executor.close()
