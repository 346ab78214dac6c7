"""Finite scalar quantization of LM states and the stop head (upstream
``ScalarQuantizationLayer`` and the ``stop_proj -> SiLU -> stop_head`` predictor)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class ScalarQuantizationLayer(nn.Module):
    """``out_proj(round(tanh(in_proj(h)) * scale) / scale)`` (inference form)."""

    def __init__(self, in_dim: int, out_dim: int, latent_dim: int, scale: int) -> None:
        super().__init__()
        self.scale = scale
        self.in_proj = nn.Linear(in_dim, latent_dim)
        self.out_proj = nn.Linear(latent_dim, out_dim)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        hidden = torch.tanh(self.in_proj(hidden))
        return self.out_proj(torch.round(hidden * self.scale) / self.scale)


def stop_logits(stop_proj: nn.Linear, stop_head: nn.Linear, lm_hidden: torch.Tensor) -> torch.Tensor:
    """Logits ``(..., 2)``; index 1 means "stop after this patch"."""
    return stop_head(F.silu(stop_proj(lm_hidden)))
