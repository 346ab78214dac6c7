"""Rotary position embeddings.

``rotate_half`` / :func:`apply_rotary` is the NeoX convention (halves rotated) used by
Qwen3 and MiniCPM; :func:`apply_rotary_interleaved` is the GPT-J pair convention.
"""

from __future__ import annotations

import torch


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope_inv_freq(head_dim: int, base: float) -> torch.Tensor:
    """``1 / base^(2i/d)`` in float32, computed as transformers does."""
    return 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).to(torch.float32) / head_dim))


def rope_cos_sin(
    positions: torch.Tensor, inv_freq: torch.Tensor, *, scale: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables of shape ``positions.shape + (head_dim,)`` (float32)."""
    freqs = positions.to(torch.float32)[..., None] * inv_freq.to(torch.float32)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    if scale != 1.0:
        cos, sin = cos * scale, sin * scale
    return cos, sin


def apply_rotary(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, compute_dtype: torch.dtype | None = None
) -> torch.Tensor:
    """``x * cos + rotate_half(x) * sin``; optionally computed in ``compute_dtype`` and cast back."""
    dtype = x.dtype
    if compute_dtype is not None:
        x = x.to(compute_dtype)
    out = (x * cos) + (rotate_half(x) * sin)
    return out.to(dtype)


def apply_rotary_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """GPT-J style: rotate pairs ``(x[2i], x[2i+1])``; cos/sin have ``head_dim/2`` entries."""
    dtype = x.dtype
    xf = x.to(torch.float32).reshape(*x.shape[:-1], -1, 2)
    x0, x1 = xf[..., 0], xf[..., 1]
    out = torch.stack((x0 * cos - x1 * sin, x1 * cos + x0 * sin), dim=-1)
    return out.flatten(-2).to(dtype)
