"""One worker's model: loaded once, it turns items into manifest rows and audio.

The same class runs in a local worker process and in a Ray actor, so both paths build every
request as the CLI does (``TaskRequest.from_inputs``) and give the CLI's audio for a seeded item. Items run
as rows of one batch (``batch_size`` at once) on the model's executor (:meth:`Synthesizer.run_many`: a Ray
actor's block, ``audiocpp book``'s chunks). Each item is prepared alone first, so its checks
and warnings (a reference cut at the cap) are its own, and a bad item fails alone.
"""

from __future__ import annotations

import json
import queue
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from audiocpp.engine.errors import AudiocppError, AudiocppWarning
from audiocpp.engine.execution.jobs import Cancelled
from audiocpp.engine.execution.watch import watch
from audiocpp.engine.records import AudioBuffer, WordTiming

from .manifest import Item


@dataclass
class JobSpec:
    """What every worker needs to load the model the same way (JSON-safe, sent to workers)."""

    family: str
    model_path: str
    load_options: dict[str, Any] = field(default_factory=dict)
    session_options: dict[str, Any] = field(default_factory=dict)
    threads: int | None = None
    batch_size: int = 1
    timeout_s: float | None = None  # each item's deadline (Job.cancel_after): it fails when it passes

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        return cls(**json.loads(text))


@dataclass
class Done:
    """What a worker reports for one item (only ``row`` goes into the manifest)."""

    row: dict[str, Any]
    audio: AudioBuffer | None = None  # None when it failed
    worker: str = ""
    voices_prepared: int = 0  # the worker's count so far
    warnings: list[str] = field(default_factory=list)  # the engine's (e.g. a reference cut)
    batch_rows: float = 1.0  # the mean number of items in the batched calls it took part in
    words: list[WordTiming] = field(default_factory=list)  # timed words (families that time them)

    def to_json(self) -> str:
        """All but the audio as plain JSON (a Ray actor sends it so), times unrounded."""
        words = [[w.text, w.start, w.end, w.phonemes] for w in self.words]
        return json.dumps({**vars(self), "audio": None, "words": words}, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str, audio: AudioBuffer | None) -> Done:
        data = json.loads(text)
        words = [WordTiming(str(t), float(a), float(b), str(p)) for t, a, b, p in data.pop("words")]
        return cls(**{**data, "audio": audio, "words": words})


def describe(error: BaseException) -> str:
    """An error as one line for the manifest: the message and its hint."""
    if isinstance(error, AudiocppError):
        return error.message + (f" (hint: {error.hint})" if error.hint else "")
    if isinstance(error, Cancelled):  # a deadline passed (--timeout), or the run was stopped
        return str(error)
    return f"internal error: {type(error).__name__}: {error}"


def load_failure(error: BaseException) -> list[str | None]:
    """A model-load error as plain data a worker can send: [class name, message, hint]."""
    return [type(error).__name__, getattr(error, "message", str(error)), getattr(error, "hint", None)]


def raise_load_failure(failure: list[str | None]) -> None:
    """Raise the driver-side error for a worker's load failure: the same audiocpp error class when
    it was one (a bad model path is the user's to fix), else an internal error."""
    from audiocpp.engine import errors

    kind, message, hint = failure
    error_type = getattr(errors, str(kind), None)
    if isinstance(error_type, type) and issubclass(error_type, errors.AudiocppError):
        raise error_type(str(message), hint=hint)
    raise RuntimeError(f"a batch worker could not load the model: {kind}: {message}")


def error_row(item: Item, message: str, wall_s: float | None = None) -> dict[str, Any]:
    return {"id": item.id, "status": "error", "error": message, "output": None, "audio_s": None,
            "wall_s": None if wall_s is None else round(wall_s, 4), "rtf": None, "seed": item.seed}


@dataclass
class PlannedItem:
    """An item ready to join a batch: its session and request, or the row of its failure."""

    item: Item
    start: float
    session: Any = None
    request: Any = None
    failed: dict[str, Any] | None = None


def request_of(item: Item) -> Any:
    """``item``'s request, built as the CLI builds it (``TaskRequest.from_inputs``)."""
    from audiocpp.engine.records import TaskRequest

    return TaskRequest.from_inputs(item.text, voice_ref=item.voice_ref or None,
                                   reference_text=item.reference_text, instruct=item.instruct,
                                   language=item.language, seed=item.seed,
                                   voice_prompt=item.voice_prompt or None, options=item.options)


def voices_prepared(model: Any) -> int:
    """A worker's reference preparations so far (misses of its model's content cache)."""
    return int(model.reference_cache.misses)


def done_of(planned: PlannedItem, result: Any, worker: str, prepared: int) -> Done:
    """The item's Done from its result (a TaskResult, or the error that ended it); ``prepared``: the
    worker's count of prepared voices."""
    item = planned.item
    if planned.failed is not None:
        return Done(planned.failed, None, worker, prepared)
    if isinstance(result, BaseException):
        row = error_row(item, describe(result), time.perf_counter() - planned.start)
        return Done(row, None, worker, prepared)
    metrics = result.metrics
    row = {"id": item.id, "status": "ok", "error": None, "output": item.out,
           "audio_s": round(metrics.audio_s, 4), "wall_s": round(metrics.wall_s, 4),
           "rtf": round(metrics.rtf, 4) if metrics.audio_s > 0 else None, "seed": metrics.seed}
    return Done(row, result.audio, worker, prepared, list(result.warnings), metrics.batch_rows,
                list(result.words))


class Synthesizer:
    """A loaded model and one session per task; never raises for an item."""

    def __init__(self, job: JobSpec, model: Any = None) -> None:
        """``model``: the job's model already loaded (a Ray actor's: engine.ray_cluster.ModelActor); else
        it is loaded here."""
        from audiocpp.engine.loader import ModelRef, load_model

        use_threads(job)
        self.job = job
        # the driver's plan: a local path and its family (engine.loader, as every front end)
        self.model = model if model is not None else load_model(ModelRef(Path(job.model_path), job.family),
                                                                 job.load_options)
        self.sessions: dict[str, Any] = {}

    def plan(self, item: Item) -> PlannedItem:
        """``item``'s session and request (built as the CLI builds them); never raises."""
        start = time.perf_counter()
        try:
            session = self.sessions.get(item.task)
            if session is None:
                session = self.model.create_session(item.task, "offline", self.job.session_options)
                self.sessions[item.task] = session
            return PlannedItem(item, start, session, request_of(item))
        except Exception as error:  # a failing item never stops the others
            failed = error_row(item, describe(error), time.perf_counter() - start)
            return PlannedItem(item, start, failed=failed)

    def run_many(self, items: list[Item], worker: str = "",
                 record: Callable[[Item, Done], None] | None = None) -> list[Done]:
        """``items`` as rows of the model's running batch, joining it at the same step (``batch_size`` at
        once, the next joining as one leaves): their Done, in order, once all have ended; ``record(item,
        done)`` as each ends, in this thread. The jobs are watched (Ctrl-C and SIGTERM cancel them,
        engine/execution/watch.py); never raises for the items' own problems."""
        planned = [self.plan(item) for item in items]
        runnable = [i for i, p in enumerate(planned) if p.failed is None]
        ended: queue.SimpleQueue[tuple[int, Any]] = queue.SimpleQueue()  # (index, result or error)
        for i in sorted(set(range(len(items))) - set(runnable)):
            ended.put((i, None))
        if runnable:
            executor = self.model.executor(max_batch=max(1, self.job.batch_size))
            jobs = executor.submit_all([planned[i].request for i in runnable], deadline_s=self.job.timeout_s,
                                       sessions=[planned[i].session for i in runnable])
            for i, job in zip(runnable, jobs):
                watch(job).add_done_callback(lambda j, i=i: ended.put((i, j.outcome)))
        done: list[Any] = [None] * len(items)
        for _ in items:
            while True:
                try:  # a timeout, so that Ctrl-C is seen while the batch runs
                    i, outcome = ended.get(timeout=0.2)
                    break
                except queue.Empty:
                    continue
            done[i] = done_of(planned[i], outcome, worker, voices_prepared(self.model))
            if record is not None:
                record(items[i], done[i])
        return done


def use_threads(job: JobSpec) -> None:
    """The job's torch threads (``--threads``), before its model loads."""
    if job.threads:
        import torch

        torch.set_num_threads(int(job.threads))


def quiet_engine_warnings() -> None:
    """Keep the engine's warnings off a worker's stderr: each item's come back in its Done."""
    warnings.filterwarnings("ignore", category=AudiocppWarning)
