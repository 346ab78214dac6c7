"""One worker's model: loaded once, it turns items into manifest rows and audio.

The same class runs in a local worker process and in a Ray actor, so both paths build every
request with the CLI's own ``build_request`` and give the CLI's audio for a seeded item.
"""

from __future__ import annotations

import json
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from audiocpp.engine.errors import AudiocppError, AudiocppWarning
from audiocpp.engine.records import AudioBuffer

from .manifest import Item


@dataclass
class JobSpec:
    """What every worker needs to load the model the same way (JSON-safe, sent to workers)."""

    family: str
    model_path: str
    load_options: dict[str, Any] = field(default_factory=dict)
    session_options: dict[str, Any] = field(default_factory=dict)
    threads: int | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        return cls(**json.loads(text))


@dataclass
class Done:
    """What a worker reports for one item: its manifest row, its audio (None when it failed), the
    worker's count of prepared voices so far, and the engine's warnings (e.g. a reference cut)."""

    row: dict[str, Any]
    audio: AudioBuffer | None = None
    worker: str = ""
    voices_prepared: int = 0
    warnings: list[str] = field(default_factory=list)


def describe(error: BaseException) -> str:
    """An error as one line for the manifest: the message and its hint."""
    if isinstance(error, AudiocppError):
        return error.message + (f" (hint: {error.hint})" if error.hint else "")
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


class Synthesizer:
    """A loaded model and one session per task; never raises for an item."""

    def __init__(self, job: JobSpec) -> None:
        import torch

        from audiocpp.engine.registry import get_family

        if job.threads:
            torch.set_num_threads(int(job.threads))
        self.job = job
        self.model = get_family(job.family).load(Path(job.model_path), job.load_options)
        self.sessions: dict[str, Any] = {}

    @property
    def voices_prepared(self) -> int:
        """Reference preparations so far (misses of the model's content cache)."""
        return self.model.reference_cache.misses

    def run(self, item: Item, worker: str = "") -> Done:
        """Synthesize ``item``; never raises for the item's own problems."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", AudiocppWarning)
            row, audio = self._run(item)
        said = [str(w.message) for w in caught if issubclass(w.category, AudiocppWarning)]
        return Done(row, audio, worker, self.voices_prepared, said)

    def _run(self, item: Item) -> tuple[dict[str, Any], AudioBuffer | None]:
        from audiocpp.engine.cli.run import RunArgs, build_request

        start = time.perf_counter()
        try:
            session = self.sessions.get(item.task)
            if session is None:
                session = self.model.create_session(item.task, "offline", self.job.session_options)
                self.sessions[item.task] = session
            args = RunArgs(
                task=item.task, voice_ref=Path(item.voice_ref) if item.voice_ref else None,
                reference_text=item.reference_text, instruct=item.instruct, language=item.language,
                seed=item.seed, voice_prompt=Path(item.voice) if item.voice else None,
            )
            result = session.run(build_request(args, item.text, dict(item.options)))
        except Exception as error:  # a failing item never stops the others
            return error_row(item, describe(error), time.perf_counter() - start), None
        metrics = result.metrics
        row = {"id": item.id, "status": "ok", "error": None, "output": item.out,
               "audio_s": round(metrics.audio_s, 4), "wall_s": round(metrics.wall_s, 4),
               "rtf": round(metrics.rtf, 4) if metrics.audio_s > 0 else None, "seed": metrics.seed}
        return row, result.audio
