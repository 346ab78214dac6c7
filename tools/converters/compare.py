"""Load a converted GGUF with audiocpp and compare its audio with the source folder's.

Each family runs a few short, seeded requests (tts, and clone where the family clones) on both
models; the figures are the audio cosine, the largest absolute sample difference and the RMS
difference relative to the folder's RMS, over the common length (a quantized model may stop
at another step). Used by ``run_matrix.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from audiocpp.engine import TaskRequest, VoiceReference, load

# (task, request kwargs without voice, options); a "{ref}" voice means the family's reference WAV.
REQUESTS: dict[str, list[tuple[str, dict[str, Any], dict[str, Any]]]] = {
    "omnivoice": [
        ("tts", {"text": "Nice to meet you."}, {"num_inference_steps": 8, "seed": 3}),
        ("design", {"text": "Hello world, a slightly longer test.", "instruct": "female, high pitch",
                    "language": "en"}, {"num_inference_steps": 8, "seed": 4}),
        ("clon", {"text": "One, two, three.", "reference_text": "Hello there"},
         {"num_inference_steps": 8, "seed": 5}),
    ],
    "voxcpm1": [
        ("tts", {"text": "Hello world.", "seed": 42}, {"max_tokens": 8, "retry_badcase": False}),
        ("clon", {"text": "Hello.", "seed": 5, "reference_text": "A short prompt."},
         {"max_tokens": 8, "retry_badcase": False}),
    ],
    "audio8_tts": [
        ("tts", {"text": "Hello world, this is a test.", "seed": 3}, {"max_new_tokens": 20}),
        ("clon", {"text": "Hello.", "seed": 5, "reference_text": "A short prompt."}, {"max_new_tokens": 20}),
    ],
    "voxcpm2": [
        ("tts", {"text": "Hello world.", "seed": 42}, {"max_tokens": 8, "retry_badcase": False}),
        ("clon", {"text": "Hello.", "seed": 5, "reference_text": "A short prompt."},
         {"max_tokens": 8, "retry_badcase": False}),
    ],
}


@dataclass
class Drift:
    """The worst figures over a family's requests."""

    cosine: float = 1.0
    max_abs: float = 0.0
    rel_rms: float = 0.0
    identical: bool = True
    lengths: list[tuple[int, int]] = field(default_factory=list)
    tokens_same: int = 0  # discrete-token families (OmniVoice): audio tokens equal to the folder's
    tokens_total: int = 0

    def add_tokens(self, ref: list[np.ndarray], out: list[np.ndarray]) -> None:
        for a, b in zip(ref, out):
            a, b = np.asarray(a), np.asarray(b)
            if a.ndim != b.ndim:
                continue
            common = tuple(slice(0, min(x, y)) for x, y in zip(a.shape, b.shape))  # over the common frames
            self.tokens_total += a[common].size
            self.tokens_same += int((a[common] == b[common]).sum())

    def add(self, ref: np.ndarray, out: np.ndarray) -> None:
        self.lengths.append((len(ref), len(out)))
        self.identical = self.identical and ref.shape == out.shape and bool(np.array_equal(ref, out))
        n = min(len(ref), len(out))
        a, b = ref[:n].astype(np.float64), out[:n].astype(np.float64)
        denom = float(np.linalg.norm(a) * np.linalg.norm(b))
        cos = float(a @ b / denom) if denom > 0 else (1.0 if np.array_equal(a, b) else 0.0)
        rms = float(np.sqrt(np.mean(a * a))) if n else 0.0
        self.cosine = min(self.cosine, cos)
        self.max_abs = max(self.max_abs, float(np.max(np.abs(a - b))) if n else 0.0)
        self.rel_rms = max(self.rel_rms, float(np.sqrt(np.mean((a - b) ** 2))) / rms if rms > 0 else 0.0)

    @property
    def same_length(self) -> bool:
        return all(a == b for a, b in self.lengths)

    def summary(self) -> str:
        if self.identical:
            return "bit-identical audio"
        text = f"cos {self.cosine:.7f}, max |d| {self.max_abs:.2e}, rel RMS {self.rel_rms:.2e}"
        if self.tokens_total:
            text += f", tokens {100 * self.tokens_same / self.tokens_total:.1f} % equal"
        return text if self.same_length else text + f" (lengths {self.lengths})"


def run_requests(model: Any, family: str, reference_wav: Path) -> list[tuple[np.ndarray, list | None]]:
    """(audio, audio tokens or None) of each request."""
    out = []
    for task, kwargs, options in REQUESTS[family]:
        voice = VoiceReference(path=reference_wav) if task == "clon" else None
        result = model.session(task).run(TaskRequest(voice=voice, options=dict(options), **kwargs))
        details = result.details or {}
        tokens = details.get("tokens", details.get("codes"))
        out.append((np.asarray(result.audio.samples, dtype=np.float32).reshape(-1), tokens))
    return out


class Comparer:
    """Runs each family's requests on a folder once, then on every converted file."""

    def __init__(self, reference_wavs: dict[str, Path]) -> None:
        self.reference_wavs = reference_wavs
        self._folder_audio: dict[tuple[str, Path], list[np.ndarray]] = {}

    def audio(self, family: str, path: Path, load_options: dict[str, Any] | None = None) -> list[tuple]:
        model = load(path, load_options=load_options)  # the family is detected, as a user gets it
        if model.family != family:
            raise AssertionError(f"{path.name} was detected as {model.family}, not {family}")
        return run_requests(model, family, self.reference_wavs[family])

    def compare(self, family: str, folder: Path, converted: Path,
                load_options: dict[str, Any] | None = None) -> Drift:
        key = (family, folder)
        if key not in self._folder_audio:
            self._folder_audio[key] = self.audio(family, folder)
        drift = Drift()
        for (ref, ref_tokens), (out, tokens) in zip(self._folder_audio[key],
                                                    self.audio(family, converted, load_options)):
            drift.add(ref, out)
            if ref_tokens is not None and tokens is not None:
                drift.add_tokens(list(ref_tokens), list(tokens))
        return drift
