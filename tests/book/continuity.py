"""A speaker-embedding-free measure of voice drift: how far each chunk's spectral envelope is from the
narrator's.

Each sentence's audio is cut from its assembled chapter (the exact cue), framed (25 ms Hann windows,
10 ms hops), and its frames within 40 dB of its loudest are averaged as a log-mel spectrum (40 bands,
50 Hz to 8 kHz, in dB). The profile's mean over the bands is removed, so the level of a sentence does
not count, only the shape of its spectrum (the timbre a listener hears change between speakers). The
drift of a sentence is the root mean square, over the bands, of the difference between its profile
and the narrator sentence's, in dB.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import soundfile as sf

BANDS = 40
FMIN, FMAX = 50.0, 8000.0


def _mel(hz: np.ndarray | float) -> np.ndarray:
    return 2595.0 * np.log10(1.0 + np.asarray(hz) / 700.0)


def _hz(mel: np.ndarray) -> np.ndarray:
    return 700.0 * (10.0 ** (mel / 2595.0) - 1.0)


def filterbank(rate: int, n_fft: int) -> np.ndarray:
    """Triangular mel filters (``BANDS`` x ``n_fft // 2 + 1``)."""
    edges = _hz(np.linspace(_mel(FMIN), _mel(min(FMAX, rate / 2)), BANDS + 2))
    bins = np.fft.rfftfreq(n_fft, 1.0 / rate)
    bank = np.zeros((BANDS, bins.size))
    for i in range(BANDS):
        low, centre, high = edges[i : i + 3]
        bank[i] = np.maximum(0.0, np.minimum((bins - low) / (centre - low), (high - bins) / (high - centre)))
    return bank


def profile(samples: np.ndarray, rate: int) -> np.ndarray:
    """The sentence's mean log-mel spectrum (dB) over its speech frames, its mean over bands removed."""
    window, hop = int(0.025 * rate), int(0.010 * rate)
    n_fft = 1 << (max(window, 2048) - 1).bit_length()
    if samples.size < window:
        samples = np.pad(samples, (0, window - samples.size))
    frames = np.lib.stride_tricks.sliding_window_view(samples.astype(np.float64), window)[::hop]
    power = np.abs(np.fft.rfft(frames * np.hanning(window), n_fft)) ** 2
    energy = power.sum(axis=1)
    speech = energy >= energy.max() * 1e-4  # within 40 dB of the loudest frame
    mel = 10.0 * np.log10(power[speech] @ filterbank(rate, n_fft).T + 1e-12)
    shape = mel.mean(axis=0)
    return shape - shape.mean()


def drift(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sqrt(np.mean((a - b) ** 2)))


def sentences(work: Path) -> dict[str, tuple[np.ndarray, int]]:
    """Every sentence's audio in a work folder's assembled chapters (mastering off), by its text."""
    out = {}
    for meta_path in (work / "chapters").glob("*.json"):
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        audio = next(p for p in (meta_path.with_suffix(".flac"), meta_path.with_suffix(".wav")) if p.exists())
        samples, rate = sf.read(audio, dtype="float32")
        for text, _, start, end in meta["sentences"]:
            out[text] = (samples[start:end], rate)
    return out


def clip(path: Path) -> tuple[np.ndarray, int]:
    """A file's audio trimmed of its quiet edges, as the book's assembly trims a chunk."""
    from audiocpp.book.assemble import trim

    samples, rate = sf.read(path, dtype="float32")
    return trim(samples, rate), rate


def drifts(audio: dict[str, tuple[np.ndarray, int]], narrator: str) -> list[float]:
    """Each sentence's drift from the narrator's sentence, in book order (the narrator's left out)."""
    reference = profile(*audio[narrator])
    return [drift(profile(*sound), reference) for text, sound in audio.items() if text != narrator]
