"""A 16-bit PCM segment with pydub 0.25.1's ``AudioSegment`` semantics, on numpy.

Only what the silence functions need: length in milliseconds, slicing by milliseconds,
``rms`` / ``dBFS`` as ``audioop`` computes them, ``reverse`` and concatenation. Every rounding
is pydub's, so that silence decisions and cut points are identical:

- ``len(seg)`` is ``round(1000 * frames / rate)`` (Python's round, half to even);
- a position of ``ms`` milliseconds is frame ``int(ms * (rate / 1000.0))``;
- a slice is clamped to ``len(seg)`` and, when that lies past the last frame (``len`` rounds
  up), padded with zero frames to the expected length;
- ``rms`` is ``int(sqrt(sum of squares / samples))`` over all interleaved samples, 0 when empty;
- ``dBFS`` is ``20 * log(rms / 32768, 10)``, ``-inf`` when ``rms`` is 0.

Samples are kept interleaved (frame-major), as pydub keeps its bytes, so ``reverse`` reverses
samples, not frames, exactly like ``audioop.reverse`` (it swaps channels; a second reverse
undoes it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MAX_POSSIBLE_AMPLITUDE = 32768.0  # 2 ** 16 / 2, pydub's max_possible_amplitude for 16 bits


def float_to_int16(audio: np.ndarray) -> np.ndarray:
    """OmniVoice's conversion: ``(x * 32768).clip(-32768, 32767).astype(int16)`` (truncates)."""
    return (audio * 32768.0).clip(-32768, 32767).astype(np.int16)


@dataclass(frozen=True, eq=False)
class Segment:
    """Interleaved int16 ``samples`` (frames x channels, flattened) at ``frame_rate``."""

    samples: np.ndarray
    frame_rate: int
    channels: int = 1

    def __post_init__(self) -> None:
        samples = np.ascontiguousarray(self.samples, dtype=np.int16).reshape(-1)
        if samples.size % self.channels:
            raise ValueError("the number of samples must be a multiple of the number of channels")
        object.__setattr__(self, "samples", samples)

    # -- construction and conversion ------------------------------------------------------
    @classmethod
    def from_float(cls, audio: np.ndarray, sample_rate: int) -> Segment:
        """OmniVoice's ``numpy_to_audiosegment`` for float ``(C, T)`` (or mono ``(T,)``) audio."""
        audio = np.asarray(audio)
        if audio.ndim == 1:
            audio = audio[np.newaxis, :]
        if audio.ndim != 2:
            raise ValueError(f"audio must have shape (C, T), got {audio.shape}")
        pcm = float_to_int16(audio)
        return cls(pcm.T.reshape(-1), int(sample_rate), int(audio.shape[0]))

    @classmethod
    def silent(cls, duration: float = 1000, frame_rate: int = 11025) -> Segment:
        """pydub's ``AudioSegment.silent``: mono zeros of ``int(rate * duration / 1000)`` frames."""
        return cls(np.zeros(int(frame_rate * (duration / 1000.0)), dtype=np.int16), frame_rate, 1)

    def to_float(self) -> np.ndarray:
        """OmniVoice's ``audiosegment_to_numpy``: float32 ``(C, T)``, samples / 32768."""
        data = self.samples.astype(np.float32) / 32768.0
        if self.channels == 1:
            return data[np.newaxis, :]
        return data.reshape(-1, self.channels).T

    # -- sizes ------------------------------------------------------------------------------
    @property
    def frame_count(self) -> int:
        return self.samples.size // self.channels

    def __len__(self) -> int:
        """Length in milliseconds, rounded as pydub rounds it."""
        return round(1000 * (float(self.frame_count) / self.frame_rate))

    def ms_to_frames(self, ms: float) -> int:
        """pydub's ``_parse_position``: negative positions count from the end."""
        if ms < 0:
            ms = len(self) - abs(ms)
        return int(ms * (self.frame_rate / 1000.0))

    # -- slicing ----------------------------------------------------------------------------
    def __getitem__(self, item: slice) -> Segment:
        if not isinstance(item, slice) or item.step:
            raise TypeError("Segment supports slicing by milliseconds with [start:end] only")
        length = len(self)
        start = 0 if item.start is None else item.start
        end = length if item.stop is None else item.stop
        a = self.ms_to_frames(min(start, length))
        b = self.ms_to_frames(min(end, length))
        c = self.channels
        data = self.samples[a * c:b * c]
        missing = (b - a) - data.size // c
        if missing > 0 and data.size:
            data = np.concatenate([data, np.zeros(missing * c, dtype=np.int16)])
        return Segment(data, self.frame_rate, c)

    # -- loudness ---------------------------------------------------------------------------
    @property
    def rms(self) -> int:
        if self.samples.size == 0:
            return 0
        wide = self.samples.astype(np.int64)
        return int(math.sqrt(float(np.dot(wide, wide)) / float(self.samples.size)))

    @property
    def dBFS(self) -> float:  # noqa: N802 (pydub's name)
        return rms_to_dbfs(self.rms)

    def window_rms(self, starts_ms: np.ndarray, ends_ms: np.ndarray) -> np.ndarray:
        """``[self[s:e].rms for s, e in zip(starts, ends)]`` for non-negative positions, vectorised."""
        length = len(self)
        per_ms = self.frame_rate / 1000.0
        starts = np.minimum(np.asarray(starts_ms, dtype=np.float64), length)
        ends = np.minimum(np.asarray(ends_ms, dtype=np.float64), length)
        a = (starts * per_ms).astype(np.int64)
        b = (ends * per_ms).astype(np.int64)
        n = self.frame_count
        wide = self.samples.astype(np.int64).reshape(n, self.channels)
        cumsum = np.concatenate([[0], np.cumsum((wide * wide).sum(axis=1))])
        present_end = np.clip(b, 0, n)
        present_start = np.clip(a, 0, n)
        sums = cumsum[np.maximum(present_end, present_start)] - cumsum[present_start]
        # The slice holds (b - a) frames (zero-padded past the end) unless nothing is present.
        frames = np.where(present_end > present_start, b - a, 0)
        count = (frames * self.channels).astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            values = np.sqrt(sums.astype(np.float64) / count)
        return np.where(count > 0, np.floor(values), 0).astype(np.int64)

    # -- editing ----------------------------------------------------------------------------
    def reverse(self) -> Segment:
        """``audioop.reverse``: the interleaved samples in reverse order."""
        return Segment(self.samples[::-1], self.frame_rate, self.channels)

    def __add__(self, other: Segment) -> Segment:
        """``append(other, crossfade=0)``: mono widens to the other's channels (sample repeated).

        pydub would also resample both sides to the higher rate. OmniVoice only joins pieces of
        one segment onto an empty start, so here rates must agree, and an empty side adopts the
        other's rate (what pydub's sync of empty data amounts to when the rate goes up).
        """
        channels = max(self.channels, other.channels)
        left, right = _widen(self, channels), _widen(other, channels)
        if left.samples.size == 0:
            return right
        if right.samples.size == 0:
            return left
        if left.frame_rate != right.frame_rate:
            raise ValueError("cannot join segments of different sample rates")
        return Segment(np.concatenate([left.samples, right.samples]), left.frame_rate, channels)


def _widen(seg: Segment, channels: int) -> Segment:
    if seg.channels == channels:
        return seg
    if seg.channels != 1:
        raise ValueError("cannot join segments with different numbers of channels")
    return Segment(np.repeat(seg.samples, channels), seg.frame_rate, channels)


def rms_to_dbfs(rms: int) -> float:
    """pydub's ``ratio_to_db(rms / max_possible_amplitude)``."""
    if not rms:
        return -math.inf
    return 20 * math.log(float(rms / MAX_POSSIBLE_AMPLITUDE), 10)


def db_to_float(db: float) -> float:
    """pydub's ``db_to_float`` (amplitude)."""
    return 10 ** (float(db) / 20)
