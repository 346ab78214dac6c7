"""Time-stretching that keeps the pitch: a phase vocoder on torch's STFT.

Used to fit synthesized speech into a fixed slot (subtitle dubbing) when the family has no
duration control of its own. The algorithm is torchaudio's ``phase_vocoder`` (magnitudes
interpolated between neighbouring frames, phases advanced by the measured instantaneous
frequency), with an STFT of about 40 ms and a hop of a quarter of it.
"""

from __future__ import annotations

import math

import numpy as np
import torch


def _fft_size(sample_rate: int) -> int:
    return 1 << max(8, round(math.log2(0.04 * sample_rate)))


def time_stretch(samples: np.ndarray, sample_rate: int, length: int) -> np.ndarray:
    """``samples`` (mono float32) stretched or compressed in time to exactly ``length`` samples."""
    x = np.asarray(samples, dtype=np.float32).reshape(-1)
    if length <= 0:
        return np.zeros(0, np.float32)
    if len(x) == length:
        return x.copy()
    n_fft = _fft_size(sample_rate)
    if len(x) <= n_fft:  # too short for an STFT: plain interpolation (the pitch shifts a little)
        if len(x) == 0:
            return np.zeros(length, np.float32)
        return np.interp(np.linspace(0, len(x) - 1, length), np.arange(len(x)), x).astype(np.float32)
    hop = n_fft // 4
    window = torch.hann_window(n_fft)
    spec = torch.stft(torch.from_numpy(x), n_fft, hop, window=window, return_complex=True)  # (F, frames)
    rate = len(x) / length
    steps = torch.arange(0, spec.shape[-1], rate, dtype=torch.float64)
    alphas = (steps % 1.0).to(torch.float32)
    phase_advance = torch.linspace(0, math.pi * hop, spec.shape[0])[:, None]
    first_phase = spec[:, :1].angle()
    padded = torch.nn.functional.pad(spec, (0, 2))
    index = steps.floor().long()
    s0, s1 = padded[:, index], padded[:, index + 1]
    delta = s1.angle() - s0.angle() - phase_advance
    delta = delta - 2 * math.pi * torch.round(delta / (2 * math.pi)) + phase_advance
    phase = torch.cumsum(torch.cat([first_phase, delta[:, :-1]], dim=-1), dim=-1)
    magnitude = alphas * s1.abs() + (1 - alphas) * s0.abs()
    stretched = torch.polar(magnitude, phase)
    out = torch.istft(stretched, n_fft, hop, window=window, length=length)
    return out.numpy().astype(np.float32)
