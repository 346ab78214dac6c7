"""Loudness, peaks and noise floor, measured as ACX (Audible's Audiobook Creation Exchange) measures a
file, and ACX's rules.

- RMS: of the whole chapter, unweighted, in dBFS (a full-scale sine is -3 dBFS);
- peaks: the true peak (ITU-R BS.1770 annex 2: the signal oversampled 4x), in dBTP, which is never
  below the sample peak ACX reads;
- noise floor: the RMS of the quietest 500 ms window (hops of 50 ms), in dBFS;
- loudness: BS.1770 integrated loudness in LUFS (pyloudnorm), reported beside them;
- room tone: how long the chapter's head and tail stay below -50 dBFS (10 ms frames).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: ACX's requirements (https://www.acx.com/help/acx-audio-submission-requirements/201456300)
RMS_RANGE = (-23.0, -18.0)
PEAK_MAX = -3.0
FLOOR_MAX = -60.0
HEAD_RANGE = (0.5, 1.0)
TAIL_RANGE = (1.0, 5.0)
SILENCE_DB = -50.0  # below this a 10 ms frame is room tone, not speech
_BLOCK = 1 << 18


def db(value: float) -> float:
    return 20.0 * math.log10(value) if value > 0 else -math.inf


def rms_db(samples: np.ndarray) -> float:
    if samples.size == 0:
        return -math.inf
    x = samples.astype(np.float64, copy=False)
    return db(math.sqrt(float(np.dot(x, x)) / x.size))


def true_peak_envelope(samples: np.ndarray) -> np.ndarray:
    """Per sample, the largest magnitude of the signal oversampled 4x around it (and of the sample)."""
    from scipy.signal import resample_poly

    x = np.asarray(samples, dtype=np.float32)
    out = np.abs(x)
    pad = 64
    for start in range(0, x.size, _BLOCK):
        lo, hi = max(0, start - pad), min(x.size, start + _BLOCK + pad)
        up = np.abs(resample_poly(x[lo:hi], 4, 1)).astype(np.float32)
        n = hi - lo
        env = up[: n * 4].reshape(n, 4).max(axis=1)
        begin = start - lo
        end = begin + min(_BLOCK, x.size - start)
        np.maximum(out[start : start + end - begin], env[begin:end], out=out[start : start + end - begin])
    return out


def true_peak_db(samples: np.ndarray) -> float:
    if samples.size == 0:
        return -math.inf
    return db(float(true_peak_envelope(samples).max()))


def noise_floor_db(samples: np.ndarray, rate: int, window_s: float = 0.5, hop_s: float = 0.05) -> float:
    """The RMS of the quietest ``window_s`` window (the whole chapter when it is shorter)."""
    if samples.size == 0:
        return -math.inf
    window = max(1, int(round(window_s * rate)))
    if samples.size <= window:
        return rms_db(samples)
    hop = max(1, int(round(hop_s * rate)))
    squares = np.concatenate(([0.0], np.cumsum(samples.astype(np.float64) ** 2)))
    starts = np.arange(0, samples.size - window + 1, hop)
    energy = (squares[starts + window] - squares[starts]) / window
    return db(math.sqrt(max(float(energy.min()), 0.0)))


def frame_levels(samples: np.ndarray, rate: int, frame_s: float = 0.01) -> np.ndarray:
    """RMS of consecutive ``frame_s`` frames, in dBFS."""
    frame = max(1, int(round(frame_s * rate)))
    n = samples.size // frame
    if n == 0:
        return np.zeros(0)
    x = samples[: n * frame].astype(np.float64).reshape(n, frame)
    with np.errstate(divide="ignore"):
        return 10.0 * np.log10(np.mean(x * x, axis=1))


def quiet_edges(samples: np.ndarray, rate: int) -> tuple[float, float]:
    """Seconds of room tone (below ``SILENCE_DB``) at the head and at the tail."""
    levels = frame_levels(samples, rate)
    loud = np.flatnonzero(levels > SILENCE_DB)
    duration = samples.size / rate
    if loud.size == 0:
        return duration, duration
    frame = 0.01
    return float(loud[0] * frame), float(max(0.0, duration - (loud[-1] + 1) * frame))


def lufs(samples: np.ndarray, rate: int) -> float | None:
    """BS.1770 integrated loudness (pyloudnorm), None for audio shorter than its 400 ms block."""
    import pyloudnorm

    if samples.size < int(0.4 * rate) + 1:
        return None
    meter = pyloudnorm.Meter(rate)
    value = float(meter.integrated_loudness(samples.astype(np.float64)))
    return value if math.isfinite(value) else None


@dataclass
class Levels:
    duration_s: float
    rms_db: float
    peak_db: float  # true peak, dBTP
    floor_db: float
    lufs: float | None
    head_s: float
    tail_s: float

    def problems(self) -> list[str]:
        """What breaks ACX's rules, in words (empty: it passes)."""
        out = []
        low, high = RMS_RANGE
        if not low <= self.rms_db <= high:
            out.append(f"RMS {_fmt(self.rms_db)} dB is outside {low:g} to {high:g}")
        if self.peak_db > PEAK_MAX:
            out.append(f"peak {_fmt(self.peak_db)} dB is above {PEAK_MAX:g}")
        if self.floor_db > FLOOR_MAX:
            out.append(f"noise floor {_fmt(self.floor_db)} dB is above {FLOOR_MAX:g}")
        if not HEAD_RANGE[0] - 0.02 <= self.head_s <= HEAD_RANGE[1] + 0.02:
            out.append(
                f"{self.head_s:.2f} s of room tone at the head (wants {HEAD_RANGE[0]:g}-{HEAD_RANGE[1]:g} s)"
            )
        if not TAIL_RANGE[0] - 0.02 <= self.tail_s <= TAIL_RANGE[1] + 0.02:
            out.append(
                f"{self.tail_s:.2f} s of room tone at the tail (wants {TAIL_RANGE[0]:g}-{TAIL_RANGE[1]:g} s)"
            )
        return out


def _fmt(value: float) -> str:
    return f"{value:.1f}" if math.isfinite(value) else "-inf"


def measure(samples: np.ndarray, rate: int) -> Levels:
    head, tail = quiet_edges(samples, rate)
    return Levels(
        samples.size / rate,
        rms_db(samples),
        true_peak_db(samples),
        noise_floor_db(samples, rate),
        lufs(samples, rate),
        head,
        tail,
    )
