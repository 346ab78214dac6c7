"""Small signal helpers on numpy ``(C, T)`` audio, with OmniVoice's exact arithmetic.

The fades are ``np.linspace(..., dtype=float32)`` ramps multiplied in place, the gains are
evaluated in upstream's order (``x / peak * 0.5``, ``x * target / rms``), so a family that
uses them reproduces upstream's output bit for bit.
"""

from __future__ import annotations

import numpy as np


def fade_and_pad(audio: np.ndarray, pad_duration: float = 0.1, fade_duration: float = 0.1,
                 sample_rate: int = 24000) -> np.ndarray:
    """Linear fade-in/out of ``fade_duration`` s (at most half the audio each) and
    ``pad_duration`` s of zeros on both sides (OmniVoice's ``fade_and_pad_audio``)."""
    if audio.shape[-1] == 0:
        return audio
    fade_n = int(fade_duration * sample_rate)
    pad_n = int(pad_duration * sample_rate)
    out = audio.copy()
    if fade_n > 0:
        k = min(fade_n, out.shape[-1] // 2)
        if k > 0:
            out[..., :k] *= np.linspace(0, 1, k, dtype=np.float32)[np.newaxis, :]
            out[..., -k:] *= np.linspace(1, 0, k, dtype=np.float32)[np.newaxis, :]
    if pad_n > 0:
        zeros = np.zeros((out.shape[0], pad_n), dtype=out.dtype)
        out = np.concatenate([zeros, out, zeros], axis=-1)
    return out


def cross_fade_chunks(chunks: list[np.ndarray], sample_rate: int,
                      silence_duration: float = 0.3) -> np.ndarray:
    """Join ``(C, T)`` chunks: each junction fades the left side out and the right side in over
    a third of ``silence_duration`` and puts a third of it of silence between them
    (OmniVoice's ``cross_fade_chunks``; a single chunk is returned as is)."""
    if not chunks:
        raise ValueError("cross_fade_chunks needs at least one chunk")
    if len(chunks) == 1:
        return chunks[0]
    fade_n = int(silence_duration * sample_rate) // 3
    silence_n = fade_n
    merged = chunks[0].copy()
    for chunk in chunks[1:]:
        fade_out_n = min(fade_n, merged.shape[-1])
        if fade_out_n > 0:
            merged[..., -fade_out_n:] *= np.linspace(1, 0, fade_out_n, dtype=np.float32)[np.newaxis, :]
        gap = np.zeros((chunks[0].shape[0], silence_n), dtype=np.float32)
        incoming = chunk.copy()
        fade_in_n = min(fade_n, incoming.shape[-1])
        if fade_in_n > 0:
            incoming[..., :fade_in_n] *= np.linspace(0, 1, fade_in_n, dtype=np.float32)[np.newaxis, :]
        merged = np.concatenate([merged, gap, incoming], axis=-1)
    return merged


def peak_normalize(audio: np.ndarray, peak: float = 0.5) -> np.ndarray:
    """Scale so that the largest magnitude is ``peak`` (``x / max|x| * peak``); audio whose
    peak is at most 1e-6 (or that is empty) is returned unchanged."""
    if audio.size == 0:
        return audio
    current = np.abs(audio).max()
    if current > 1e-6:
        return audio / current * peak
    return audio


def rms(audio: np.ndarray) -> float:
    """``sqrt(mean(x ** 2))`` over all samples (0.0 for empty audio)."""
    if audio.size == 0:
        return 0.0
    return float(np.sqrt(np.mean(audio**2)))


def rms_normalize(audio: np.ndarray, target: float, current: float | None = None) -> np.ndarray:
    """``audio * target / current``, ``current`` defaulting to ``rms(audio)``; unchanged when
    ``current`` is 0.

    OmniVoice raises a quiet reference with ``if 0 < r < 0.1: rms_normalize(x, 0.1, r)`` and
    scales its output back with ``rms_normalize(y, r, 0.1)``; both are upstream's expressions.
    """
    if current is None:
        current = rms(audio)
    if current == 0:
        return audio
    return audio * target / current
