"""Sampling helpers that draw from an explicit ``torch.Generator``.

Drawing with ``torch.rand(shape, generator=g)`` consumes the same MT19937 stream as
upstream's ``torch.rand_like`` on the global generator seeded with the same seed, as long
as the draws happen in the same order and shapes.
"""

from __future__ import annotations

import torch


def uniform_like(x: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    return torch.rand(x.shape, generator=generator, dtype=x.dtype, device=x.device)


def gumbel_noise_like(x: torch.Tensor, generator: torch.Generator | None, eps: float = 1e-10) -> torch.Tensor:
    """``-log(-log(u + eps) + eps)``, the form OmniVoice uses."""
    u = uniform_like(x, generator)
    return -torch.log(-torch.log(u + eps) + eps)


def keep_top_k(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep exactly the ``k`` largest entries per row (ties broken as ``topk`` breaks them), -inf elsewhere."""
    values, indices = logits.topk(k, dim=-1)
    out = torch.full_like(logits, float("-inf"))
    out.scatter_(-1, indices, values)
    return out
