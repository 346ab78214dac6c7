"""LocEnc: encodes one latent patch into one LM-sized vector (upstream ``VoxCPMLocEnc``).

The patch's ``P`` frames are projected (``in_proj``), a learned ``special_token`` (CLS) is
prepended, and a non-causal MiniCPM stack runs over the ``P + 1`` positions; the output is read
at position 0.
"""

from __future__ import annotations

import torch
from torch import nn

from ..config import MiniCPMConfig
from .minicpm import MiniCPMModel


class LocEnc(nn.Module):
    def __init__(self, cfg: MiniCPMConfig, input_dim: int) -> None:
        super().__init__()
        self.special_token = nn.Parameter(torch.zeros(1, 1, 1, cfg.hidden_size))
        self.in_proj = nn.Linear(input_dim, cfg.hidden_size, bias=True)
        self.encoder = MiniCPMModel(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``(B, T, P, D)`` latent patches -> ``(B, T, hidden)``."""
        b, t, p, _ = x.shape
        x = self.in_proj(x)
        x = torch.cat([self.special_token.expand(b, t, 1, -1), x], dim=2)
        out = self.encoder(x.reshape(b * t, p + 1, -1), causal=False)
        return out[:, 0, :].reshape(b, t, -1)
