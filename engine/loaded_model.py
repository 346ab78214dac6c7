"""A loaded model: weights already in torch, ready to create sessions."""

from __future__ import annotations

import queue
from abc import ABC, abstractmethod
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

from .cache import ContentCache
from .errors import UsageError, did_you_mean
from .execution import BatchLoop, BatchResults, Cancelled, LocalExecutor, RowEvent
from .execution.jobs import check_deadline
from .guard import _CREATE, ModelGuard, guarded, model_guard
from .metrics import Stopwatch
from .records import AudioBuffer, TaskRequest, VoicePrompt
from .request_rules import check_task_and_mode
from .session import Session
from .spec.model_spec import ModelSpec
from .spec.options import resolve_options
from .tasks import Mode, Task, parse_mode, parse_task


class LoadedModel(ABC):
    """Base class of a family's loaded model: subclasses set ``sample_rate`` and implement
    :meth:`_create_session`; the base checks the task, mode and session options against the spec, owns
    the cache of prepared references and voice prompts (by content hash) and the model's executor."""

    sample_rate: int = 0

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A family's voice-prompt hooks run holding the model's guard, as sessions do (engine/guard.py)."""
        super().__init_subclass__(**kwargs)
        for name in ("load_voice_prompt", "encode_voice_prompt", "decode_voice_prompt"):
            method = cls.__dict__.get(name)
            if callable(method) and not getattr(method, "__audiocpp_guarded__", False):
                setattr(cls, name, guarded(method))

    @property
    def guard(self) -> ModelGuard:
        """The lock its sessions share: one synthesis at a time per model (engine/guard.py)."""
        return model_guard(self)

    def __init__(self, spec: ModelSpec, path: Path | None,
                 load_options: dict[str, Any] | None = None) -> None:
        self.spec = spec
        self.family = spec.family
        self.path = path
        self.load_options = dict(load_options or {})
        self.reference_cache = ContentCache(max_entries=8)

    def session(self, task: str | Task = "tts", mode: str | Mode = "offline",
                **session_options: Any) -> Session:
        """Shorthand: ``model.session("tts", compute_dtype="bfloat16")``: session options are keyword
        arguments named as the spec names them (no family prefix)."""
        names = [row.name for row in self.spec.options.session]
        for name in session_options:
            if self.spec.option("session", name) is None:
                hint = f"{self.family} takes no session options"
                if names:
                    hint = (f"{did_you_mean(name, names)}session options of {self.family} (keyword arguments "
                            f"of session()): {', '.join(names)}")
                raise UsageError(f"{self.family} has no session option {name!r}", hint=hint)
        return self.create_session(task, mode, session_options)

    def create_session(
        self, task: str | Task, mode: str | Mode = Mode.OFFLINE, session_options: dict[str, Any] | None = None
    ) -> Session:
        task, mode, options = self.check_session(task, mode, session_options)
        with model_guard(self).held(reentrant=True):  # families build per-dtype networks here
            return self._create_session(task, mode, options)

    def check_session(self, task: str | Task, mode: str | Mode = Mode.OFFLINE,
                      session_options: dict[str, Any] | None = None) -> tuple[Task, Mode, dict[str, Any]]:
        """The task, mode and typed session options a session would get, checked against the spec
        (what :meth:`create_session` checks before the family builds anything)."""
        task = parse_task(task)
        mode = parse_mode(mode)
        check_task_and_mode(self.spec, task, mode, others=self.families_with_task(task))
        return task, mode, resolve_options(self.spec, "session", session_options)

    @abstractmethod
    def _create_session(self, task: Task, mode: Mode, options: dict[str, Any]) -> Session: ...

    # -- running requests (engine.execution) ------------------------------------------------------
    def stream_batch(self, rows: Sequence[tuple[Session, TaskRequest]], *, max_batch: int | None = None,
                     deadline_s: float | None = None) -> Generator[RowEvent, None, None]:
        """``rows`` (a session of this model and a request each) as one batch on an executor of its own:
        ``RowEvent``s tagged with the row's index, each row's in order, rows interleaved as they come.
        ``max_batch``: at most that many rows at once, the next joining as one leaves (default: all of
        them). Closing the iterator early cancels what is still running."""
        if not rows:
            return
        events: queue.Queue[RowEvent] = queue.Queue()
        executor = LocalExecutor(self, max_batch=len(rows) if max_batch is None else max_batch)
        try:
            jobs = executor.submit_all([request for _, request in rows], sessions=[s for s, _ in rows],
                                       sink=events.put, deadline_s=deadline_s)
            left = len(jobs)
            while left:  # a new executor numbers its jobs 0, 1, ...: their keys are the rows' indices
                event = events.get()
                left -= event.is_final
                yield event
        finally:
            executor.close()

    def run_batch(self, rows: Sequence[tuple[Session, TaskRequest]], *, return_exceptions: bool = False,
                  max_batch: int | None = None, deadline_s: float | None = None) -> BatchResults:
        """The results of ``rows`` as one batch (``max_batch`` as in :meth:`stream_batch`), in row order,
        with the batch's ``wall_s``; a failing row raises its error (``return_exceptions``: the error takes
        its place, the others go on); ``deadline_s``: each row still running that many seconds from now is
        cancelled. Run by the calling thread (holding the model's guard), so torch's thread-local state
        around it (a dispatch mode counting ops, a profiler) sees the batch's ops."""
        check_deadline(deadline_s)
        if any(getattr(session, "model", self) is not self for session, _ in rows):
            raise UsageError(f"a session must belong to the model that runs it (the {self.family} model)")
        clock, waiting = Stopwatch(), list(enumerate(rows))[::-1]
        results = BatchResults([None] * len(rows))
        limit = len(rows) if max_batch is None else max(1, int(max_batch))
        late = None if deadline_s is None else Cancelled(f"the deadline of {deadline_s:g} s passed",
                                                         deadline_s=deadline_s)
        with model_guard(self).held(what="the model"):
            loop = BatchLoop()
            try:
                while waiting or len(loop):
                    passed = deadline_s is not None and clock.elapsed() >= deadline_s
                    while waiting and (passed or len(loop) < limit):  # past the deadline, every row leaves
                        index, (session, request) = waiting.pop()
                        loop.add(index, session, request, queued_s=clock.elapsed())
                    for index in range(len(rows)) if passed else ():
                        loop.cancel(index, late)
                    for event in loop.step():
                        if event.error is not None and not return_exceptions:
                            raise event.error
                        if event.is_final:
                            results[event.key] = event.error or event.event.result  # type: ignore[union-attr]
            finally:
                loop.close()
        results.wall_s = clock.elapsed()
        return results

    @staticmethod
    def families_with_task(task: Task) -> list[str]:
        """The installed families that do ``task`` (a refusal's hint): none known until the loader sets
        the registry's lookup on the model (``engine.loader.load_planned``)."""
        return []

    #: How many requests a batch holds by default, per device type: the family's
    #: (``FamilyPlugin.max_batch``, set on the model when the plugin loads it)
    max_batch_by_device: dict[str, int] = {"cpu": 8, "cuda": 8, "mps": 8}

    def default_max_batch(self) -> int:
        """The batch size this family defaults to on this model's device (``FamilyPlugin.max_batch``)."""
        from .device import device_of

        return self.max_batch_by_device.get(device_of(self.load_options).type, 8)

    def executor(self, max_batch: int | None = None, *, window_s: float | None = None) -> LocalExecutor:
        """The model's in-process executor (made on first use): requests submitted from any thread join
        the running batch at its next step and leave when done (engine.execution.LocalExecutor).
        Arguments given here update its limits; ``max_batch`` defaults to :meth:`default_max_batch`."""
        with _CREATE:
            executor = self.__dict__.get("_audiocpp_executor")
            if executor is None or executor.closed:
                executor = self.__dict__["_audiocpp_executor"] = LocalExecutor(self, self.default_max_batch())
        executor.configure(max_batch=max_batch, window_s=window_s)
        return executor

    def named_voices(self) -> list[dict[str, Any]]:
        """The model's built-in voices (request option ``voice``): ``{"name", "language", "language_name",
        "gender"}`` each; empty for families that clone instead (the default)."""
        return []

    def default_voice(self, language: str | None = None) -> str | None:
        """The named voice a request without ``voice`` gets (for ``language`` where it matters), or None."""
        return None

    def phonemize(self, text: str, language: str | None = None) -> dict[str, Any]:
        """The family's text front end alone: ``{"phonemes": str, "tokens": [ids], "language": code,
        "guessed": bool}`` (families that speak from phonemes override it: Kokoro)."""
        raise UsageError(f"{self.family} has no phoneme front end",
                         hint="phonemes are what families that speak from phonemes (kokoro) take")

    @property
    def supports_voice_prompts(self) -> bool:
        """Whether this family saves and reuses prepared voices (it overrides :meth:`load_voice_prompt`)."""
        return type(self).load_voice_prompt is not LoadedModel.load_voice_prompt

    def load_voice_prompt(self, path: Path) -> VoicePrompt:
        """Read a prepared voice prompt saved by this family (override where supported)."""
        raise UsageError(f"{self.family} does not support saved voice prompts (--voice-prompt)")

    # -- the codec tool (`audiocpp codec encode / decode`) --------------------------------------
    @property
    def supports_codec_prompts(self) -> bool:
        """Whether this family encodes references into voice prompts and decodes them back
        (it overrides :meth:`encode_voice_prompt` and :meth:`decode_voice_prompt`)."""
        return type(self).encode_voice_prompt is not LoadedModel.encode_voice_prompt

    def encode_voice_prompt(self, audio: AudioBuffer, reference_text: str | None,
                            options: dict[str, Any]) -> VoicePrompt:
        """Encode reference ``audio`` (mono, any rate, already capped) and its transcript into the
        voice prompt that a clone with ``--voice-ref`` and ``--reference-text`` prepares, so that
        ``--voice-prompt`` with it clones alike. ``options``: the typed request options."""
        raise UsageError(f"{self.family} has no codec tool (encoding references into voice prompts)",
                         hint="run `audiocpp families` to see which families have one")

    def decode_voice_prompt(self, prompt: VoicePrompt) -> AudioBuffer:
        """The codec's own decoding of a prompt's codes or latents (no post-processing)."""
        raise UsageError(f"{self.family} has no codec tool (decoding voice prompts)",
                         hint="run `audiocpp families` to see which families have one")
