"""The session base: what every family shares around its generator.

A family session implements :meth:`Session._synthesize`, a generator that yields audio
pieces as they become available (only when ``request.streaming``) and returns a
:class:`Synthesis`. The base owns request validation against the spec, option typing,
reference-audio loading, seeding, metrics and the event protocol, so ``run`` and
``stream`` behave the same in every family.
"""

from __future__ import annotations

import secrets
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import fs
from .errors import AudiocppWarning, UsageError
from .guard import model_guard
from .progress import NullProgress, Progress
from .records import AudioBuffer, StreamEvent, TaskRequest, TaskResult, VoicePrompt, VoiceReference
from .spec.options import resolve_options
from .tasks import Mode, Task

if TYPE_CHECKING:
    import torch

    from .batching import BatchResults, Op, RowEvent
    from .model import LoadedModel

#: The request option that caps reference audio, declared by every spec with cloning.
REFERENCE_CAP_OPTION = "max_reference_seconds"


def check_voice_inputs(task: Task, *, voice: bool, voice_prompt: bool, reference_text: bool) -> None:
    """The rules on reference inputs that hold in every family (the CLI checks them before loading):
    a reference voice or saved prompt only for cloning, not both, and a transcript only with audio."""
    if voice and voice_prompt:
        raise UsageError("give either --voice-ref or --voice-prompt, not both",
                         hint="a saved voice prompt already holds its reference audio and transcript")
    if task is not Task.CLONE and (voice or voice_prompt):
        what = "reference audio (--voice-ref)" if voice else "voice prompt (--voice-prompt)"
        raise UsageError(f"task {task.cli_name!r} takes no {what}", hint="use --task clon to clone a voice")
    if reference_text and not voice:
        raise UsageError(
            "--reference-text needs --voice-ref (the audio it transcribes)",
            hint="a --voice-prompt carries its own transcript; drop --reference-text"
            if voice_prompt else "pass --voice-ref FILE with --task clon, or drop --reference-text",
        )


def check_reference_length(duration: float, cap: float | None, *, transcript: bool, name: str) -> bool:
    """Whether a reference of ``duration`` seconds must be cut to the cap (``None`` or 0: no cap).

    Upstream OmniVoice cuts references over 20 s at a pause, but only without a transcript:
    a cut reference would no longer match its transcript, so one over the cap with a
    transcript is refused instead.
    """
    if not cap or duration <= cap:
        return False
    if transcript:
        raise UsageError(
            f"the reference audio {name} is {duration:.1f} s long, over the {cap:g} s cap for references "
            "(request option max_reference_seconds); cut with its transcript it would no longer match",
            hint="use a 3-20 s clip of it with that clip's transcript, or raise the cap: "
            f"--request-option {REFERENCE_CAP_OPTION}=N (0: no cap)",
        )
    return True


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

@dataclass
class PreparedRequest:
    """A validated request, what ``Session._synthesize`` receives.

    ``options``: every request option of the spec by its full name (``seed``, ``mytts.gain``), typed,
    defaults filled in (None where the spec has no default). ``seed``: the request's seed (drawn at
    random when the request gave none; only a spec that declares ``seed`` lets callers set it).
    ``voice``: the reference audio (mono float32, its own rate) or None; ``voice_prompt``: a loaded
    prompt or None; ``progress``: call ``start(label, total)`` and ``advance()``.
    """

    text: str
    task: Task
    mode: Mode
    options: dict[str, Any]
    seed: int
    voice: AudioBuffer | None = None
    voice_prompt: VoicePrompt | None = None
    progress: Progress = field(default_factory=NullProgress)

    @property
    def streaming(self) -> bool:
        return self.mode is Mode.STREAMING

    def generator(self) -> torch.Generator:
        """A CPU ``torch.Generator`` seeded with the request seed.

        Seeded like ``torch.manual_seed(seed)``, it yields the same stream as torch's
        global CPU generator, so draws taken in upstream's order and shapes reproduce
        upstream's seeded runs.
        """
        import torch

        gen = torch.Generator(device="cpu")
        gen.manual_seed(self.seed)
        return gen


@dataclass
class Synthesis:
    """What a family's generator returns when it is done: the whole ``audio``; its ``chunks`` (the
    long-form or streamed pieces, in order; ``TaskResult.chunks``, the files of ``--out-dir`` in
    offline mode); a prepared ``voice_prompt`` to save (``--voice-prompt-out``); ``details`` for
    parity tests and power users. Without ``chunks`` the metrics count the pieces it yielded."""

    audio: AudioBuffer
    chunks: list[AudioBuffer] = field(default_factory=list)
    voice_prompt: VoicePrompt | None = None
    details: dict[str, Any] = field(default_factory=dict)


class Session(ABC):
    """Base class of family sessions (one task and mode, typed session options)."""

    def __init__(self, model: LoadedModel, task: Task, mode: Mode, options: dict[str, Any]) -> None:
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
        result = None
        for event in self.stream(request, progress=progress):
            if event.is_final:
                result = event.result
        assert result is not None
        return result

    def stream(self, request: TaskRequest, *, progress: Progress | None = None) -> Iterator[StreamEvent]:
        """Yield ``audio`` events as the family produces them, then one ``final`` event. The model's
        guard is held from preparing the request to the final event: sessions of one model run one
        at a time, from any number of threads (engine/guard.py); finish or close() a stream."""
        with model_guard(self.model).held(what=f"the {self.family} model"):
            yield from self._stream(request, progress=progress)

    def _stream(self, request: TaskRequest, *, progress: Progress | None = None) -> Iterator[StreamEvent]:
        """One request is a batch of one: the same loop runs it (engine.batching)."""
        from .batching import BatchLoop

        loop = BatchLoop()
        loop.add(0, self, request, progress=progress)
        try:
            while len(loop):
                for row_event in loop.step():
                    if row_event.error is not None:
                        raise row_event.error
                    yield row_event.event
        finally:
            loop.close()

    # -- many requests in one forward pass ----------------------------------------------------
    def run_batch(self, requests: Sequence[TaskRequest], *, return_exceptions: bool = False) -> BatchResults:
        """Synthesize ``requests`` together: their network steps run as rows of one batch, and each
        result is what the request gives alone (its own options, seed and stop; float32 results
        equal to float rounding, docs/batching.md). Results come in request order, with the batch's
        ``wall_s``. A failing request raises its error (``return_exceptions``: it takes its place
        in the list instead, and the others go on)."""
        return self.model.run_batch([(self, r) for r in requests], return_exceptions=return_exceptions)

    def stream_batch(self, requests: Sequence[TaskRequest]) -> Iterator[RowEvent]:
        """``requests`` as one batch, streamed: ``RowEvent``s tagged with the request's index, each
        request's events in order (its audio pieces, then its final event, or its ``error``),
        requests interleaved as their rows produce them."""
        return self.model.stream_batch([(self, r) for r in requests])

    # -- preparation -----------------------------------------------------------------
    def prepare(self, request: TaskRequest, *, progress: Progress | None = None) -> PreparedRequest:
        text = request.text if isinstance(request.text, str) else ""
        if not text.strip():
            raise UsageError("the text to synthesize is empty", hint="pass --text, --text-file or text on stdin")
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
        check_voice_inputs(self.task, voice=request.voice is not None, voice_prompt=request.voice_prompt is not None,
                           reference_text=bool(str(options.get("reference_text") or "").strip()))
        voice = None
        if request.voice is not None:
            voice = self.read_voice(request.voice)
            voice = self._cap_reference(voice, options, request.voice)
        voice_prompt = self._resolve_voice_prompt(request.voice_prompt)
        prepared = PreparedRequest(
            text=text,
            task=self.task,
            mode=self.mode,
            options=options,
            seed=int(seed),
            voice=voice,
            voice_prompt=voice_prompt,
            progress=progress or NullProgress(),
        )
        if self.task is Task.CLONE and voice is None and voice_prompt is None and not self._has_audio_option(options):
            raise UsageError(
                f"task 'clon' needs a reference voice for {self.family}",
                hint="pass --voice-ref FILE (and --reference-text with its transcript) or --voice-prompt FILE",
            )
        self._validate(prepared)
        return prepared

    def _has_audio_option(self, options: dict[str, Any]) -> bool:
        return any(
            row.type in ("audio_path", "audio_path_list") and options.get(row.name)
            for row in self.spec.options.request
        )

    def _resolve_voice_prompt(self, value: str | Path | VoicePrompt | None) -> VoicePrompt | None:
        if value is None:
            return None
        if isinstance(value, (str, Path)):
            path = Path(value)
            if not fs.is_file(path):
                raise UsageError(f"voice prompt {str(path)!r} does not exist", hint="check the --voice-prompt path")
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

    # -- family hooks -----------------------------------------------------------------
    def _validate(self, request: PreparedRequest) -> None:
        """Family-specific checks of a prepared request (raise UsageError)."""

    @abstractmethod
    def _synthesize(self, request: PreparedRequest) -> Generator[AudioBuffer | Op, Any, Synthesis]:
        """The row program: yield audio pieces while generating (when streaming), and an
        ``engine.batching.Op`` wherever the network runs (``result = yield op``: batched with the
        other rows' ops when the request runs in a batch); return the Synthesis."""
