"""Mastering a chapter for ACX: room tone in the pauses, the RMS brought into ACX's range, peaks held
under the ceiling by a true-peak limiter (a smooth gain, never clipping).

The chapter comes as two tracks of the same length: ``speech`` (the sentences, zeros in the pauses)
and ``gaps`` (True where room tone goes: the head, the pauses, the tail). The speech gets one gain
and the limiter; the room tone stays at its level (-72 dBFS RMS: below ACX's -60 dB noise floor,
never digital silence); the gain is solved so that the whole chapter, room tone included, measures
``TARGET_RMS`` (iterated, since the limiter takes some of it back).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .loudness import db, rms_db, true_peak_envelope

TARGET_RMS = -20.0  # the middle of ACX's -23 to -18 dB
#: the limiter's ceiling: under ACX's -3 dB with a margin for the AAC / MP3 encoder's overshoot
CEILING_DB = -4.0
ROOM_TONE_DB = -72.0
HEAD_S = 0.75  # ACX: 0.5-1 s of room tone at a chapter's head
TAIL_RANGE_S = (1.0, 5.0)  # and 1-5 s at its tail


def room_tone(n: int, seed: int) -> np.ndarray:
    """``n`` samples of soft noise (white noise through a gentle low-pass) at ``ROOM_TONE_DB`` RMS."""
    if n <= 0:
        return np.zeros(0, np.float32)
    from scipy.signal import lfilter

    rng = np.random.default_rng(seed)
    noise = lfilter([0.3], [1.0, -0.7], rng.standard_normal(n))
    level = math.sqrt(float(np.mean(noise**2))) or 1.0
    return (noise * (10 ** (ROOM_TONE_DB / 20) / level)).astype(np.float32)


def limiter_gain(
    envelope: np.ndarray,
    rate: int,
    ceiling_db: float = CEILING_DB,
    attack_s: float = 0.005,
    release_s: float = 0.05,
) -> np.ndarray:
    """The gain (linear, <= 1) that keeps a signal whose true-peak ``envelope`` is given under
    ``ceiling_db``.

    The gain each sample needs (in dB) is spread by a minimum filter over ±``attack_s`` and then
    averaged over ``attack_s``, so it is smooth and, at every sample, at most what that sample needs;
    a second pass over ±``release_s`` lets it recover slowly. No sample is clipped."""
    from scipy.ndimage import minimum_filter1d, uniform_filter1d

    ceiling = 10 ** (ceiling_db / 20)
    with np.errstate(divide="ignore"):
        need = np.minimum(0.0, 20.0 * np.log10(ceiling / np.maximum(envelope, 1e-12))).astype(np.float32)
    if not need.any():
        return np.ones_like(need)
    gain = need
    for seconds in (attack_s, release_s):
        width = max(1, int(seconds * rate))
        gain = minimum_filter1d(gain, size=2 * width + 1, mode="nearest")
        gain = uniform_filter1d(gain, size=width | 1, mode="nearest")
    return np.power(10.0, gain / 20.0, dtype=np.float32)


def limit(
    samples: np.ndarray, rate: int, ceiling_db: float = CEILING_DB, envelope: np.ndarray | None = None
) -> np.ndarray:
    """``samples`` under the ceiling (true peak); ``envelope``: theirs, when known. A second pass
    catches the rare leftover overshoot (the gain moves between the oversampled points)."""
    if envelope is None:
        envelope = true_peak_envelope(samples)
    if samples.size == 0 or db(float(envelope.max())) <= ceiling_db:
        return samples.astype(np.float32, copy=False)
    out = samples * limiter_gain(envelope, rate, ceiling_db)
    for step in range(3):
        after = true_peak_envelope(out)
        if out.size == 0 or db(float(after.max())) <= ceiling_db:
            break
        out = out * limiter_gain(after, rate, ceiling_db - 0.1 * (step + 1))
    return out.astype(np.float32)


@dataclass
class Mastered:
    samples: np.ndarray
    gain_db: float  # applied to the speech before the limiter
    limited_db: float  # how far the limiter pulled the loudest peak down (0: not at all)


def master(
    speech: np.ndarray,
    gaps: np.ndarray,
    rate: int,
    *,
    seed: int,
    target_db: float = TARGET_RMS,
    ceiling_db: float = CEILING_DB,
) -> Mastered:
    """The chapter brought to ``target_db`` RMS (room tone included), peaks under ``ceiling_db``."""
    speech = np.asarray(speech, dtype=np.float32)
    tone = np.where(gaps, room_tone(speech.size, seed), np.float32(0.0)).astype(np.float32)
    n = max(speech.size, 1)
    tone_energy = float(np.dot(tone.astype(np.float64), tone))
    level = rms_db(speech)
    if not math.isfinite(level):  # nothing but room tone
        return Mastered(tone, 0.0, 0.0)
    gain_db = target_db - level
    envelope = true_peak_envelope(speech)  # scales with the gain: measured once
    out = speech
    for _ in range(8):
        scale = np.float32(10 ** (gain_db / 20))
        out = speech * scale * limiter_gain(envelope * scale, rate, ceiling_db)
        total = db(math.sqrt((float(np.dot(out.astype(np.float64), out)) + tone_energy) / n))
        if abs(total - target_db) < 0.05 or gain_db > 60:  # > 60 dB: mostly silence, held down anyway
            break
        gain_db += target_db - total
    out = limit(out, rate, ceiling_db)  # the check on the result, and the rare leftover overshoot
    peak_before = db(float(np.abs(speech).max()) * 10 ** (gain_db / 20)) if speech.size else 0.0
    limited = max(0.0, peak_before - ceiling_db)
    return Mastered((out + tone).astype(np.float32), gain_db, limited)
