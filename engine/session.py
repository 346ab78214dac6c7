"""The session base: what every family shares around its generator. A family implements
:meth:`Session._synthesize` (the row program); the base owns request validation against the spec, option
typing, reference-audio loading and seeding, and runs requests on the model's executor.
"""

from __future__ import annotations

import secrets
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Hashable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from . import fs
from .batching import Op
from .cache import ContentCache
from .errors import AudiocppWarning, UsageError
from .execution import BatchResults, Job, LocalExecutor, RowEvent
from .pauses import run_script
from .progress import NullProgress, Progress
from .records import (
    AudioBuffer,
    AudioPiece,
    PreparedRequest,
    StreamEvent,
    Synthesis,
    TaskRequest,
    TaskResult,
    VoicePrompt,
    VoiceReference,
)
from .request_rules import (
    REFERENCE_CAP_OPTION,
    ReferenceInputs,
    check_prompt_transcript,
    check_reference_length,
    check_request,
    check_text,
)
from .spec.model_spec import ModelSpec
from .spec.options import resolve_options
from .tasks import Mode, Task
from .text.markup import parse_markup, script_text


def cap_reference(audio: AudioBuffer, cap: float, name: str) -> AudioBuffer:
    """``audio`` cut at a pause to at most 3/4 of ``cap`` seconds (at ``cap`` = 20 s, upstream
    OmniVoice's ``trim_long_audio``: at most 15 s, at least 3 s), with a warning."""
    import warnings

    import numpy as np

    from .audio.silence import trim_long_audio

    keep = 0.75 * cap
    cut = trim_long_audio(audio.samples[np.newaxis, :], audio.sample_rate, max_duration=keep,
                          min_duration=min(3.0, keep), trim_threshold=cap)[0]
    trimmed = AudioBuffer(cut, audio.sample_rate)
    warnings.warn(
        f"the reference audio {name} is {audio.duration:.1f} s long, over the {cap:g} s cap; using its first "
        f"{trimmed.duration:.1f} s (cut at a pause). Set --request-option {REFERENCE_CAP_OPTION}=N to change "
        "the cap (0: no cap)",
        AudiocppWarning,
        stacklevel=2,
    )
    return trimmed

class SessionModel(Protocol):
    """What a session needs of its loaded model (engine/loaded_model.py's ``LoadedModel``; a family's session
    annotates its own subclass)."""

    spec: ModelSpec
    family: str
    sample_rate: int
    reference_cache: ContentCache

    def executor(self) -> LocalExecutor: ...

    def run_batch(self, rows: Sequence[tuple[Session, TaskRequest]], **options: Any) -> BatchResults: ...

    def stream_batch(self, rows: Sequence[tuple[Session, TaskRequest]]) -> Iterator[RowEvent]: ...

    def load_voice_prompt(self, path: Path) -> VoicePrompt: ...


class Session(ABC):
    """Base class of family sessions (one task and mode, typed session options)."""

    def __init__(self, model: SessionModel, task: Task, mode: Mode, options: dict[str, Any]) -> None:
        self.model = model
        self.spec = model.spec
        self.family = model.family
        self.task = task
        self.mode = mode
        self.options = options
        threads = options.get("threads")
        if threads:
            import torch

            torch.set_num_threads(int(threads))

    @property
    def sample_rate(self) -> int:
        return self.model.sample_rate

    # -- public API ------------------------------------------------------------------
    def run(self, request: TaskRequest, *, progress: Progress | None = None) -> TaskResult:
        """Synthesize and return the final result (in streaming mode too)."""
        return self.submit(request, progress=progress).result()

    def stream(self, request: TaskRequest, *, progress: Progress | None = None) -> Iterator[StreamEvent]:
        """Yield ``audio`` events as the family produces them, then one ``final`` event. Closing the
        iterator early cancels the request."""
        job = self.submit(request, progress=progress)
        try:
            yield from job.events()
        finally:
            job.cancel()

    def submit(self, request: TaskRequest | PreparedRequest, *, progress: Progress | None = None,
               owner: str = "", deadline_s: float | None = None) -> Job:
        """Queue ``request`` on ``model.executor()`` (it joins the running batch at its next step) and return
        its job at once; ``deadline_s``: cancel it that many seconds from now (``Cancelled.deadline_s``)."""
        return self.model.executor().submit(request, session=self, progress=progress, owner=owner,
                                            deadline_s=deadline_s)

    # -- many requests in one forward pass ----------------------------------------------------
    def run_batch(self, requests: Sequence[TaskRequest], *, return_exceptions: bool = False) -> BatchResults:
        """Synthesize ``requests`` as rows of one batch (:meth:`LoadedModel.run_batch`): each result is
        what the request gives alone (its own options, seed and stop; float32 results equal to float
        rounding, docs/batching.md)."""
        return self.model.run_batch([(self, r) for r in requests], return_exceptions=return_exceptions)

    def stream_batch(self, requests: Sequence[TaskRequest]) -> Iterator[RowEvent]:
        """``requests`` as one batch, streamed (:meth:`LoadedModel.stream_batch`): ``RowEvent``s tagged
        with the request's index."""
        return self.model.stream_batch([(self, r) for r in requests])

    # -- preparation -----------------------------------------------------------------
    def prepare(self, request: TaskRequest, *, progress: Progress | None = None) -> PreparedRequest:
        text = check_text(request.text)
        script = parse_markup(text)
        if script is not None:
            text = script_text(script)
        raw = dict(request.options)
        for name, value in request.first_class_options().items():
            if name in raw and str(raw[name]) != str(value):
                raise UsageError(
                    f"option {name!r} is given twice with different values ({raw[name]!r} and {value!r})"
                )
            raw[name] = value
        options = resolve_options(self.spec, "request", raw)
        seed = options.get("seed")
        if seed is None:
            seed = secrets.randbits(63)
            if "seed" in options:
                options["seed"] = seed
        check_request(self.spec, self.task, ReferenceInputs.of(
            self.spec, options, voice=request.voice is not None,
            voice_prompt=request.voice_prompt is not None))
        voice = None
        if request.voice is not None:
            voice = self.read_voice(request.voice)
            voice = self._cap_reference(voice, options, request.voice)
        voice_prompt = self._resolve_voice_prompt(request.voice_prompt)
        if voice_prompt is not None:
            check_prompt_transcript(self.spec, voice_prompt.ref_text)
        prepared = PreparedRequest(
            text=text,
            task=self.task,
            mode=self.mode,
            options=options,
            seed=int(seed),
            voice=voice,
            voice_prompt=voice_prompt,
            progress=progress or NullProgress(),
            script=script,
        )
        if text:  # a script of pauses alone has no text to check
            self._validate(prepared)
        return prepared

    def _resolve_voice_prompt(self, value: str | Path | VoicePrompt | None) -> VoicePrompt | None:
        if value is None:
            return None
        if isinstance(value, (str, Path)):
            path = Path(value)
            if not fs.is_file(path):
                raise UsageError(f"voice prompt {str(path)!r} does not exist",
                                 hint="check the --voice-prompt path")
            from .hashing import file_sha256

            key = ("voice_prompt", file_sha256(path))
            return self.model.reference_cache.get_or_compute(key, lambda: self.model.load_voice_prompt(path))
        if getattr(value, "family", self.family) != self.family:
            raise UsageError(f"the voice prompt was made by {value.family!r}, not {self.family!r}")
        return value

    def _cap_reference(self, audio: AudioBuffer, options: dict[str, Any], ref: VoiceReference) -> AudioBuffer:
        cap = options.get(REFERENCE_CAP_OPTION)
        name = repr(str(ref.path)) if ref.path is not None else "(in memory)"
        transcript = bool(str(options.get("reference_text") or "").strip())
        if check_reference_length(audio.duration, cap, transcript=transcript, name=name):
            return cap_reference(audio, float(cap), name)
        return audio

    def read_voice(self, voice: VoiceReference) -> AudioBuffer:
        """Reference audio as mono float32 at its own sample rate."""
        if voice.audio is not None:
            return voice.audio
        return self.read_audio(voice.path)

    def read_audio(self, path: str | Path) -> AudioBuffer:
        from .audio.io import read_audio

        return read_audio(path)

    def cached(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """Memoize per-reference work (e.g. encoded reference codes) by a content-hash key."""
        return self.model.reference_cache.get_or_compute((self.family, key), compute)

    def program(self, request: PreparedRequest) -> Generator[AudioBuffer | AudioPiece | Op, Any, Synthesis]:
        """The row program the batch loop runs: the family's ``_synthesize``, or for a text with pauses
        or SSML (``request.script``) each speech part through it in turn with the silences between."""
        if request.script is None:
            return self._synthesize(request)
        return run_script(self._synthesize, request, self.sample_rate)

    # -- family hooks -----------------------------------------------------------------
    def _validate(self, request: PreparedRequest) -> None:
        """Family-specific checks of a prepared request (raise UsageError)."""

    @abstractmethod
    def _synthesize(self, request: PreparedRequest) -> Generator[AudioBuffer | Op, Any, Synthesis]:
        """The row program: yield audio pieces while generating (when streaming), and an
        ``engine.batching.Op`` wherever the network runs (``result = yield op``: batched with the
        other rows' ops when the request runs in a batch); return the Synthesis."""
