"""Small typed records shared by the CLI, the Python API and families.

They are plain dataclasses: cheap to build, easy to print (short reprs that summarize audio
instead of dumping samples), no torch import.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from .progress import NullProgress, Progress
from .tasks import Mode, Task

if TYPE_CHECKING:
    import torch


@dataclass(repr=False)
class AudioBuffer:
    """Mono float32 audio. ``samples`` has shape ``(n,)``."""

    samples: np.ndarray
    sample_rate: int

    def __post_init__(self) -> None:
        samples = np.asarray(self.samples, dtype=np.float32)
        if samples.ndim == 2 and 1 in samples.shape:
            samples = samples.reshape(-1)
        if samples.ndim != 1:
            raise ValueError(f"AudioBuffer wants mono samples of shape (n,), got {samples.shape}")
        self.samples = samples
        self.sample_rate = int(self.sample_rate)

    @property
    def num_samples(self) -> int:
        return int(self.samples.shape[0])

    @property
    def duration(self) -> float:
        return self.num_samples / float(self.sample_rate) if self.sample_rate else 0.0

    def __repr__(self) -> str:
        return f"AudioBuffer({self.duration:.3f} s, {self.sample_rate} Hz, {self.num_samples} samples)"

    def content_hash(self) -> str:
        """sha256 of the samples and rate: the key of the reference caches."""
        digest = hashlib.sha256()
        digest.update(str(self.sample_rate).encode())
        digest.update(np.ascontiguousarray(self.samples).tobytes())
        return digest.hexdigest()


@dataclass(frozen=True)
class WordTiming:
    """One spoken word and where it lies in the request's audio, in seconds (the family's alignment:
    Kokoro's predicted durations). ``text`` is the word as the input wrote it; ``phonemes`` what was
    spoken for it, where the family knows."""

    text: str
    start: float
    end: float
    phonemes: str = ""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"word": self.text, "start": round(self.start, 3), "end": round(self.end, 3)}
        if self.phonemes:
            out["phonemes"] = self.phonemes
        return out

    def shifted(self, seconds: float) -> WordTiming:
        return WordTiming(self.text, self.start + seconds, self.end + seconds, self.phonemes)


@dataclass
class AudioPiece:
    """A streamed piece of audio with the words it speaks (times from the start of the request's
    audio): what a row program yields instead of a bare AudioBuffer when it knows its words."""

    audio: AudioBuffer
    words: list[WordTiming] = field(default_factory=list)


@dataclass
class VoiceReference:
    """Reference audio for cloning: a file path, or audio already in memory."""

    path: Path | None = None
    audio: AudioBuffer | None = None

    def __post_init__(self) -> None:
        if self.path is not None:
            self.path = Path(self.path)
        if (self.path is None) == (self.audio is None):
            raise ValueError("VoiceReference needs exactly one of path= or audio=")


class VoicePrompt(Protocol):
    """A family's prepared voice (e.g. reference codes + text + RMS) that can be saved and reused."""

    family: str

    def save(self, path: str | Path) -> None: ...


@dataclass
class TaskRequest:
    """One synthesis request.

    The first-class fields are shorthands for the request options of the same canonical
    name (``reference_text``, ``instruct``, ``language``, ``seed``); ``options`` holds every
    other option of the family's spec, as typed values or as strings to be parsed.
    """

    text: str = ""
    voice: VoiceReference | None = None
    reference_text: str | None = None
    instruct: str | None = None
    language: str | None = None
    seed: int | None = None
    voice_prompt: str | Path | VoicePrompt | None = None
    options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_inputs(cls, text: str, *, voice_ref: str | Path | None = None,
                    reference_text: str | None = None, instruct: str | None = None,
                    language: str | None = None, seed: int | None = None,
                    voice_prompt: str | Path | None = None,
                    options: dict[str, Any] | None = None) -> TaskRequest:
        """The request of a command line or a manifest line: a reference file path, a saved voice's
        path, the first-class fields and the other options (the CLI and ``audiocpp batch`` build
        every request with it, so a batch item gives the CLI's audio)."""
        return cls(text=text, voice=VoiceReference(path=Path(voice_ref)) if voice_ref is not None else None,
                   reference_text=reference_text, instruct=instruct, language=language, seed=seed,
                   voice_prompt=Path(voice_prompt) if voice_prompt is not None else None,
                   options=dict(options or {}))

    def first_class_options(self) -> dict[str, Any]:
        values = {
            "reference_text": self.reference_text,
            "instruct": self.instruct,
            "language": self.language,
            "seed": self.seed,
        }
        return {k: v for k, v in values.items() if v is not None}


@dataclass
class Metrics:
    """Timing and memory figures of one request (seconds, MiB).

    ``wall_s`` runs from the moment the request joined its batch (alone: from the call);
    ``queued_s`` is how long it waited before joining (a batcher's queue); ``batch_rows`` is the
    mean number of requests in the batched calls it took part in (1.0 when it ran alone).
    """

    wall_s: float = 0.0
    audio_s: float = 0.0
    time_to_first_audio_s: float | None = None
    peak_rss_mb: float = 0.0
    seed: int | None = None
    num_chunks: int = 1
    queued_s: float = 0.0
    batch_rows: float = 1.0
    #: the compute mode the session ran in (``float32``, ``float32-stored``, ``bfloat16``...) and the
    #: ISA level of the CPU kernels (``avx2``, ``avx512``...), where known
    compute: str = ""
    cpu_isa: str = ""

    @property
    def rtf(self) -> float:
        return self.wall_s / self.audio_s if self.audio_s > 0 else float("inf")

    def as_dict(self) -> dict[str, Any]:
        return {
            "wall_s": round(self.wall_s, 4),
            "audio_s": round(self.audio_s, 4),
            "rtf": round(self.rtf, 4) if self.audio_s > 0 else None,
            "time_to_first_audio_s": None
            if self.time_to_first_audio_s is None
            else round(self.time_to_first_audio_s, 4),
            "peak_rss_mb": round(self.peak_rss_mb, 1),
            "seed": self.seed,
            "num_chunks": self.num_chunks,
            "queued_s": round(self.queued_s, 4),
            "batch_rows": round(self.batch_rows, 2),
            "compute": self.compute or None,
            "cpu_isa": self.cpu_isa or None,
        }


@dataclass(repr=False)
class TaskResult:
    """The output of a request: the final audio, its named chunks and the metrics.

    ``details`` carries family-specific by-products (generated tokens, latents...) that
    parity tests and power users read; ``voice_prompt`` is set when the family prepared a
    reusable voice; ``warnings`` are the engine's warnings about this request (e.g. a reference
    cut at the cap), also issued as ``AudiocppWarning``s.
    """

    audio: AudioBuffer
    task: Task
    mode: Mode
    chunks: list[AudioBuffer] = field(default_factory=list)
    metrics: Metrics = field(default_factory=Metrics)
    voice_prompt: VoicePrompt | None = None
    details: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: each spoken word with its start and end in ``audio``, where the family aligns words (Kokoro);
    #: empty otherwise
    words: list[WordTiming] = field(default_factory=list)

    def __repr__(self) -> str:
        m = self.metrics
        rtf = f"{m.rtf:.3g}" if m.audio_s > 0 else "n/a"
        extra = f", chunks={len(self.chunks)}" if self.chunks else ""
        extra += ", voice_prompt=yes" if self.voice_prompt is not None else ""
        return (f"TaskResult(task={self.task.value!r}, mode={self.mode.value!r}, "
                f"audio={self.audio!r}{extra}, wall_s={m.wall_s:.3f}, rtf={rtf}, seed={m.seed})")


@dataclass(repr=False)
class StreamEvent:
    """An event of a streaming session: audio pieces in order, then one final event."""

    kind: Literal["audio", "final"]
    index: int
    audio: AudioBuffer | None = None
    name: str = ""
    result: TaskResult | None = None
    #: the words this audio piece speaks (times from the start of the request's audio), where the
    #: family aligns words
    words: list[WordTiming] = field(default_factory=list)

    @property
    def is_final(self) -> bool:
        return self.kind == "final"

    def __repr__(self) -> str:
        tail = f", result={self.result!r}" if self.result is not None else ""
        return f"StreamEvent(kind={self.kind!r}, index={self.index}, audio={self.audio!r}{tail})"


@dataclass
class ModelInfo:
    """What ``audiocpp inspect`` prints: family, spec summary and the weights found."""

    family: str
    path: Path
    format: str
    spec_summary: Mapping[str, Any] = field(default_factory=dict)
    namespaces: dict[str, int] = field(default_factory=dict)
    dtype_counts: dict[str, int] = field(default_factory=dict)
    num_tensors: int = 0
    embedded_files: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


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
    #: the text's speech and pauses where it holds markup (engine/text/markup.py): the engine then
    #: runs each speech part as its own request and ``text`` is their speech joined; None otherwise
    script: tuple | None = None

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
    #: word timings over ``audio`` (``TaskResult.words``), for families that align words
    words: list[WordTiming] = field(default_factory=list)
