"""Band-limited resampling equal to ``torchaudio.functional.resample`` with its defaults.

The kernel is built with the same torch operations in the same order and dtype as
torchaudio's ``_get_sinc_resample_kernel`` (Hann-windowed sinc, ``lowpass_filter_width=6``,
``rolloff=0.99``, rates reduced by their gcd), and applied the same way (zero padding of
``width`` / ``width + orig`` samples, strided ``conv1d``, crop to ``ceil(new * n / orig)``),
so the output is bit-identical to torchaudio's on the same torch build.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import overload

import numpy as np
import torch

LOWPASS_FILTER_WIDTH = 6
ROLLOFF = 0.99



def _as_rate(value: int | float, name: str) -> int:
    if int(value) != value:
        raise ValueError(f"{name}={value!r}: sample rates must be integers")
    if value <= 0:
        raise ValueError(f"{name}={value!r}: sample rates must be positive")
    return int(value)


@lru_cache(maxsize=64)
def sinc_resample_kernel(orig_freq: int, new_freq: int, dtype: torch.dtype = torch.float32,
                         device: str = "cpu") -> tuple[torch.Tensor, int]:
    """The ``(new, 1, 2 * width + orig)`` kernel and ``width`` for gcd-reduced rates.

    Cached per (orig, new, dtype, device); callers must not modify the returned tensor.
    """
    gcd = math.gcd(orig_freq, new_freq)
    orig = orig_freq // gcd
    new = new_freq // gcd
    lpw = LOWPASS_FILTER_WIDTH
    base_freq = min(orig, new) * ROLLOFF
    width = math.ceil(lpw * orig / base_freq)
    dev = torch.device(device)
    idx = torch.arange(-width, width + orig, dtype=dtype, device=dev)[None, None] / orig
    t = torch.arange(0, -new, -1, dtype=dtype, device=dev)[:, None, None] / new + idx
    t *= base_freq
    t = t.clamp_(-lpw, lpw)
    window = torch.cos(t * math.pi / lpw / 2) ** 2
    t *= math.pi
    scale = base_freq / orig
    kernels = torch.where(t == 0, torch.tensor(1.0).to(t), t.sin() / t)
    kernels *= window * scale
    return kernels, width


def _resample_tensor(waveform: torch.Tensor, orig_freq: int, new_freq: int) -> torch.Tensor:
    if not waveform.is_floating_point():
        raise TypeError(f"resample wants a floating point waveform, got {waveform.dtype}")
    gcd = math.gcd(orig_freq, new_freq)
    kernel, width = sinc_resample_kernel(orig_freq, new_freq, waveform.dtype, str(waveform.device))
    orig = orig_freq // gcd
    new = new_freq // gcd
    shape = waveform.size()
    flat = waveform.reshape(-1, shape[-1])
    num_wavs, length = flat.shape
    padded = torch.nn.functional.pad(flat, (width, width + orig))
    out = torch.nn.functional.conv1d(padded[:, None], kernel, stride=orig)
    out = out.transpose(1, 2).reshape(num_wavs, -1)
    # torchaudio rounds new * n / orig through a default-dtype tensor before the ceil.
    target_length = int(torch.ceil(torch.as_tensor(new * length / orig)).long())
    out = out[..., :target_length]
    return out.view(shape[:-1] + out.shape[-1:])


@overload
def resample(x: torch.Tensor, orig_freq: int, new_freq: int) -> torch.Tensor: ...
@overload
def resample(x: np.ndarray, orig_freq: int, new_freq: int) -> np.ndarray: ...


def resample(x: torch.Tensor | np.ndarray, orig_freq: int, new_freq: int) -> torch.Tensor | np.ndarray:
    """Resample ``x`` of shape ``(..., time)`` from ``orig_freq`` to ``new_freq`` Hz.

    Tensors give tensors (same dtype and device); numpy arrays give numpy arrays (float
    dtypes kept, computed by torch on the CPU). Equal rates return ``x`` itself, as torchaudio.
    """
    orig = _as_rate(orig_freq, "orig_freq")
    new = _as_rate(new_freq, "new_freq")
    if isinstance(x, np.ndarray):
        if orig == new:
            return x
        return _resample_tensor(torch.from_numpy(np.ascontiguousarray(x)), orig, new).numpy()
    if orig == new:
        return x
    return _resample_tensor(x, orig, new)
