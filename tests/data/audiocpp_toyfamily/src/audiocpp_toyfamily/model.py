"""The toy network: one sine tone per character, frequencies from the weights (``tone.frequencies``)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


class Tone(nn.Module):
    def __init__(self, size: int) -> None:
        super().__init__()
        self.register_buffer("frequencies", torch.zeros(size))


class ToneBank(nn.Module):
    """``tone.frequencies`` (N,): character ``c`` sounds at ``frequencies[ord(c) % N]``."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.tone = Tone(size)

    def word(self, word: str, samples_per_char: int, sample_rate: int, pitch: float = 1.0) -> np.ndarray:
        """The tones of ``word``, ``samples_per_char`` samples each (float32)."""
        freqs = self.tone.frequencies.numpy() * pitch
        t = np.arange(samples_per_char, dtype=np.float32) / sample_rate
        return np.concatenate([np.sin(2 * np.pi * freqs[ord(c) % len(freqs)] * t) for c in word])
