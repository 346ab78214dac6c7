"""LongRoPE (MiniCPM4's "longrope" rope scaling): per-frequency extension factors and a
cos/sin attention scale.

The table reproduces MiniCPM4's ``MiniCPMLongRoPE`` element for element: inverse frequencies
``1 / base^(2i/d)`` in float32, positions divided by the factors (``long_factor`` when
``max_position_embeddings > original_max_position_embeddings``, else ``short_factor``), and
cos/sin multiplied by ``sqrt(1 + ln(max/orig) / ln(orig))``. The table is built for every
position up to ``max_position_embeddings`` at once, as upstream does, so that vectorised and
scalar math kernels never see a different split of the same values; callers slice it.

Used by VoxCPM2 (MiniCPM4 backbone) only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import torch

from .rope import rope_inv_freq


def longrope_scaling_factor(max_position_embeddings: int, original_max_position_embeddings: int) -> float:
    scale = max_position_embeddings / original_max_position_embeddings
    return math.sqrt(1 + math.log(scale) / math.log(original_max_position_embeddings))


def longrope_factors(
    max_position_embeddings: int,
    original_max_position_embeddings: int,
    short_factor: Sequence[float],
    long_factor: Sequence[float],
) -> tuple[float, ...]:
    """The factor list in use: long past the original context, short otherwise."""
    if max_position_embeddings > original_max_position_embeddings:
        return tuple(long_factor)
    return tuple(short_factor)


@lru_cache(maxsize=8)
def _table(
    head_dim: int, base: float, max_pos: int, orig: int, factors: tuple[float, ...]
) -> tuple[torch.Tensor, torch.Tensor]:
    if len(factors) != head_dim // 2:
        raise ValueError(f"LongRoPE needs head_dim/2 = {head_dim // 2} factors, got {len(factors)}")
    inv_freq = rope_inv_freq(head_dim, base)
    positions = torch.arange(max_pos, dtype=torch.float32)
    ext = torch.tensor(factors, dtype=torch.float32)
    freqs = torch.mul(torch.outer(positions, 1.0 / ext), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    scale = longrope_scaling_factor(max_pos, orig)
    return emb.cos() * scale, emb.sin() * scale


def longrope_cos_sin(
    head_dim: int,
    base: float,
    max_position_embeddings: int,
    original_max_position_embeddings: int,
    short_factor: Sequence[float],
    long_factor: Sequence[float],
) -> tuple[torch.Tensor, torch.Tensor]:
    """Float32 ``(cos, sin)`` tables of shape ``(max_position_embeddings, head_dim)``.

    Tables are cached per configuration and shared: treat them as read-only.
    """
    factors = longrope_factors(max_position_embeddings, original_max_position_embeddings, short_factor,
                               long_factor)
    return _table(
        int(head_dim), float(base), int(max_position_embeddings), int(original_max_position_embeddings),
        tuple(float(f) for f in factors),
    )
