"""Resampling audio that arrives in pieces, equal to resampling the whole at once.

:func:`engine.audio.resample.resample` pads the whole signal with ``width`` zeros on the left and
``width + orig`` on the right and slides a kernel of ``2 * width + orig`` samples over it with a
stride of ``orig`` (gcd-reduced rates), giving ``new`` samples per step. A stream keeps the
samples the next steps still need, runs every step whose input is complete as pieces come, and
pads and crops at :meth:`StreamingResampler.finish` exactly as the one-shot call does, so the
concatenated output equals ``resample(whole, orig, new)`` (up to float summation order).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .resample import _as_rate, sinc_resample_kernel


class StreamingResampler:
    """``push(samples) -> samples`` as they come, then ``finish() -> samples``; mono float32."""

    def __init__(self, orig_freq: int, new_freq: int) -> None:
        self.orig_freq = _as_rate(orig_freq, "orig_freq")
        self.new_freq = _as_rate(new_freq, "new_freq")
        gcd = math.gcd(self.orig_freq, self.new_freq)
        self.orig, self.new = self.orig_freq // gcd, self.new_freq // gcd
        self.identity = self.orig_freq == self.new_freq
        if not self.identity:
            self.kernel, self.width = sinc_resample_kernel(self.orig_freq, self.new_freq, torch.float32,
                                                           "cpu")
            self._buffer = np.zeros(self.width, np.float32)  # the left zero padding
        self._consumed = 0  # input samples pushed so far
        self._emitted = 0  # output samples returned so far
        self._done = False

    def _steps(self, buffer: np.ndarray) -> tuple[np.ndarray, int]:
        """Output of every complete step over ``buffer``, and the steps taken."""
        span = 2 * self.width + self.orig
        steps = (len(buffer) - span) // self.orig + 1 if len(buffer) >= span else 0
        if steps == 0:
            return np.zeros(0, np.float32), 0
        used = torch.from_numpy(np.ascontiguousarray(buffer[: (steps - 1) * self.orig + span]))
        out = torch.nn.functional.conv1d(used[None, None], self.kernel, stride=self.orig)
        return out[0].transpose(0, 1).reshape(-1).numpy().copy(), steps

    def push(self, samples: np.ndarray) -> np.ndarray:
        """Resampled output that ``samples`` (and what came before) complete."""
        if self._done:
            raise RuntimeError("push() after finish()")
        samples = np.asarray(samples, dtype=np.float32).reshape(-1)
        self._consumed += len(samples)
        if self.identity:
            return samples.copy()
        self._buffer = np.concatenate([self._buffer, samples])
        out, steps = self._steps(self._buffer)
        self._buffer = self._buffer[steps * self.orig:]
        self._emitted += len(out)
        return out

    def finish(self) -> np.ndarray:
        """The rest: the right padding, then the crop to ``ceil(new * n / orig)`` samples."""
        if self._done:
            return np.zeros(0, np.float32)
        self._done = True
        if self.identity:
            return np.zeros(0, np.float32)
        buffer = np.concatenate([self._buffer, np.zeros(self.width + self.orig, np.float32)])
        out, _ = self._steps(buffer)
        target = int(torch.ceil(torch.as_tensor(self.new * self._consumed / self.orig)).long())
        return out[: max(0, target - self._emitted)]
