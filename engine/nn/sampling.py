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


def top_k_filter(logits: torch.Tensor, k: int, fill: float = float("-inf")) -> torch.Tensor:
    if k <= 0 or k >= logits.shape[-1]:
        return logits
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, fill)


def top_p_filter(logits: torch.Tensor, p: float, fill: float = float("-inf")) -> torch.Tensor:
    """Nucleus filter as in transformers' TopPLogitsWarper (keep at least one token)."""
    if p >= 1.0:
        return logits
    sorted_logits, sorted_idx = torch.sort(logits, descending=False, dim=-1)
    cum = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    remove_sorted = cum <= (1 - p)
    remove_sorted[..., -1:] = False
    remove = remove_sorted.scatter(-1, sorted_idx, remove_sorted)
    return logits.masked_fill(remove, fill)
