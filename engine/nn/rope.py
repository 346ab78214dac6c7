"""Rotary position embeddings.

``rotate_half`` / :func:`apply_rotary` is the NeoX convention (halves rotated) used by
Qwen3 and MiniCPM. LongRoPE tables are in ``longrope.py``.
"""

from __future__ import annotations

import torch


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope_inv_freq(head_dim: int, base: float) -> torch.Tensor:
    """``1 / base^(2i/d)`` in float32, computed as transformers does."""
    return 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).to(torch.float32) / head_dim))


def apply_rotary(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, compute_dtype: torch.dtype | None = None
) -> torch.Tensor:
    """``x * cos + rotate_half(x) * sin``; optionally computed in ``compute_dtype`` and cast back."""
    dtype = x.dtype
    if compute_dtype is not None:
        x = x.to(compute_dtype)
    out = (x * cos) + (rotate_half(x) * sin)
    return out.to(dtype)
