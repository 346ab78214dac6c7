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
from collections.abc import Callable, Generator, Hashable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import UsageError
from .metrics import Stopwatch, peak_rss_mb
from .progress import NullProgress, Progress
from .records import AudioBuffer, Metrics, StreamEvent, TaskRequest, TaskResult, VoicePrompt, VoiceReference
from .spec.options import resolve_options
from .tasks import Mode, Task

if TYPE_CHECKING:
    import torch

    from .model import LoadedModel

@dataclass
class PreparedRequest:
    """A validated request: typed options with defaults, loaded reference audio, a seed."""

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
    """What a family's generator returns when it is done."""

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
        """Yield ``audio`` events as the family produces them, then one ``final`` event."""
        clock = Stopwatch()
        prepared = self.prepare(request, progress=progress)
        generator = self._synthesize(prepared)
        first_audio: float | None = None
        index = 0
        try:
            while True:
                try:
                    piece = next(generator)
                except StopIteration as stop:
                    synthesis = stop.value
                    break
                if first_audio is None:
                    first_audio = clock.elapsed()
                yield StreamEvent(kind="audio", index=index, audio=piece, name=f"chunk_{index}")
                index += 1
        finally:
            generator.close()
            prepared.progress.close()
        if not isinstance(synthesis, Synthesis):
            raise TypeError(f"{type(self).__name__}._synthesize must return a Synthesis, got {synthesis!r}")
        wall = clock.elapsed()
        metrics = Metrics(
            wall_s=wall,
            audio_s=synthesis.audio.duration,
            time_to_first_audio_s=first_audio if first_audio is not None else wall,
            peak_rss_mb=peak_rss_mb(),
            seed=prepared.seed,
            num_chunks=max(1, len(synthesis.chunks)),
        )
        result = TaskResult(
            audio=synthesis.audio,
            task=self.task,
            mode=self.mode,
            chunks=synthesis.chunks,
            metrics=metrics,
            voice_prompt=synthesis.voice_prompt,
            details=synthesis.details,
        )
        yield StreamEvent(kind="final", index=index, audio=synthesis.audio, name="final", result=result)

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
        voice = self.read_voice(request.voice) if request.voice is not None else None
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
            if not path.is_file():
                raise UsageError(f"voice prompt {str(path)!r} does not exist", hint="check the --voice-prompt path")
            from .hashing import file_sha256

            key = ("voice_prompt", file_sha256(path))
            return self.model.reference_cache.get_or_compute(key, lambda: self.model.load_voice_prompt(path))
        if getattr(value, "family", self.family) != self.family:
            raise UsageError(f"the voice prompt was made by {value.family!r}, not {self.family!r}")
        return value

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
    def _synthesize(self, request: PreparedRequest) -> Generator[AudioBuffer, None, Synthesis]:
        """Yield audio pieces while generating (when streaming) and return the Synthesis."""
