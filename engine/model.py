"""A loaded model: weights already in torch, ready to create sessions."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .cache import ContentCache
from .errors import AudiocppError, UsageError, did_you_mean
from .guard import ModelGuard, guarded, model_guard
from .spec.model import ModelSpec
from .spec.options import resolve_options
from .tasks import Mode, Task, parse_mode, parse_task

if TYPE_CHECKING:
    from .batching import Batcher, BatchResults, RowEvent
    from .records import AudioBuffer, TaskRequest, VoicePrompt
    from .session import Session


class LoadedModel(ABC):
    """Base class of a family's loaded model.

    Subclasses set ``sample_rate`` and implement :meth:`_create_session`; the base checks
    the task and mode against the spec and parses session options, and owns the caches of
    prepared references and voice prompts (keyed by content hash).
    """

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
        for name in session_options:
            if self.spec.option("session", name) is None:
                names = [row.name for row in self.spec.options.session]
                raise UsageError(
                    f"{self.family} has no session option {name!r}",
                    hint=f"{did_you_mean(name, names)}session options of {self.family} (keyword arguments of "
                    "session()): "
                    f"{', '.join(names)}"
                    if names else f"{self.family} takes no session options",
                )
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
        from .request_rules import check_task_and_mode

        task = parse_task(task)
        mode = parse_mode(mode)
        check_task_and_mode(self.spec, task, mode)
        return task, mode, resolve_options(self.spec, "session", session_options)

    @abstractmethod
    def _create_session(self, task: Task, mode: Mode, options: dict[str, Any]) -> Session: ...

    # -- many requests in one forward pass (engine.batching) --------------------------------------
    def stream_batch(self, rows: Sequence[tuple[Session, TaskRequest]], *,
                     max_batch: int | None = None) -> Iterator[RowEvent]:
        """``rows`` (a session of this model and a request each: tasks, modes and session options
        may differ) as one batch; ``RowEvent``s tagged with the row's index. ``max_batch``: at most
        that many rows at once, the next joining as one leaves (default: all of them)."""
        from .batching import BatchLoop

        for session, _ in rows:
            if session.model is not self:
                raise UsageError("every session of a batch must belong to the model that runs it")
        limit = len(rows) if max_batch is None else max(1, int(max_batch))
        with model_guard(self).held(what=f"the {self.family} model"):
            loop = BatchLoop()
            waiting = list(enumerate(rows))
            try:
                while waiting or len(loop):
                    while waiting and len(loop) < limit:
                        index, (session, request) = waiting.pop(0)
                        loop.add(index, session, request)
                    yield from loop.step()
            finally:
                loop.close()

    def run_batch(self, rows: Sequence[tuple[Session, TaskRequest]], *, return_exceptions: bool = False,
                  max_batch: int | None = None) -> BatchResults:
        """The results of :meth:`stream_batch`, in row order, with the batch's ``wall_s``; a failing
        row raises its error (``return_exceptions``: the error takes its place, the others go on)."""
        from .batching import BatchResults
        from .metrics import Stopwatch

        clock = Stopwatch()
        results: list = [None] * len(rows)
        stream = self.stream_batch(rows, max_batch=max_batch)
        try:
            for event in stream:
                if event.error is not None:
                    if not return_exceptions:
                        raise event.error
                    results[event.key] = event.error
                elif event.event is not None and event.event.is_final:
                    results[event.key] = event.event.result
        finally:
            stream.close()
        out = BatchResults(results)
        out.wall_s = clock.elapsed()
        return out

    def default_max_batch(self) -> int:
        """The batch size this family defaults to on this model's device (``FamilyPlugin.max_batch``)."""
        from .device import device_of
        from .registry import get_family

        try:
            plugin = get_family(self.family)
        except AudiocppError:  # a family not in the registry (a test's own): the engine's default
            return 8
        return plugin.default_max_batch(device_of(self.load_options).type)

    def batcher(self, max_batch: int | None = None, *, window_s: float | None = None) -> Batcher:
        """The model's batcher (made on first use): requests submitted from any thread join the
        running batch at its next step and leave when done (engine.batching.Batcher). Arguments
        given here update its limits; ``max_batch`` defaults to :meth:`default_max_batch`."""
        from .batching import Batcher
        from .guard import _CREATE

        with _CREATE:
            batcher = self.__dict__.get("_audiocpp_batcher")
            if batcher is None or batcher.closed:
                rows = self.default_max_batch() if max_batch is None else max_batch
                batcher = Batcher(self, max_batch=rows, window_s=0.0 if window_s is None else window_s)
                self.__dict__["_audiocpp_batcher"] = batcher
                return batcher
        batcher.configure(max_batch=max_batch, window_s=window_s)
        return batcher

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
