"""Weight-norm folding: ``w = g * v / ||v||`` with the norm over every dim except ``dim``."""

from __future__ import annotations

import torch


def fold_weight_norm(v: torch.Tensor, g: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """Equal to ``torch._weight_norm(v, g, dim)`` (what ``nn.utils.weight_norm`` computes)."""
    return torch._weight_norm(v, g, dim)
