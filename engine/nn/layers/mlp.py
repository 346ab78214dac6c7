"""The SiLU-gated MLP of Llama-style blocks (``gate_proj``, ``up_proj``, ``down_proj``).

Used by Audio8 TTS's Falcon-H1 backbone; the other decoders' MLP is ``decoder.FeedForward``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class SwiGLU(nn.Module):
    def __init__(self, dim: int, hidden: int, bias: bool = False) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=bias)
        self.up_proj = nn.Linear(dim, hidden, bias=bias)
        self.down_proj = nn.Linear(hidden, dim, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from .decoder import apply_all

        gate, up = apply_all([self.gate_proj, self.up_proj], x)
        return self.down_proj(F.silu(gate) * up)
