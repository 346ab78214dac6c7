"""LocDiT: the local diffusion transformer that predicts a patch's velocity field.

Upstream ``VoxCPMLocDiT`` (v1, ``local_dit.py``) and its v2 (``local_dit_v2.py``) differ only
in how the LM conditioning ``mu`` enters the sequence, the ``mu_tokens`` switch:

- ``mu_tokens == 0`` (v1): ``mu`` (one hidden-sized vector, the sum of the two projections) is
  added to the time embedding: ``[mu + t, cond(P'), x(P)]``;
- ``mu_tokens >= 1`` (v2): ``mu`` is split into ``mu_tokens`` hidden-sized prefix tokens
  before the time token: ``[mu_1 .. mu_k, t, cond(P'), x(P)]``.

The transformer body is a non-causal MiniCPM stack with rope; the output is read at the
``x`` positions.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..config import MiniCPMConfig
from .minicpm import MiniCPMModel

#: The projected ``cond`` and the ``dt`` embedding (None: made per call) shared by a solve's steps.
Fixed = tuple[torch.Tensor, "torch.Tensor | None"]


def sinusoidal_embedding(x: torch.Tensor, dim: int, scale: float = 1000) -> torch.Tensor:
    """Upstream ``SinusoidalPosEmb(dim)(x, scale)``: ``cat(sin, cos)`` of ``scale * x * freqs``."""
    if x.ndim < 1:
        x = x.unsqueeze(0)
    half = dim // 2
    step = math.log(10000) / (half - 1)
    freqs = torch.exp(torch.arange(half, dtype=x.dtype, device=x.device) * -step)
    emb = scale * x.unsqueeze(1) * freqs.unsqueeze(0)
    return torch.cat((emb.sin(), emb.cos()), dim=-1)


class TimestepEmbedding(nn.Module):
    def __init__(self, in_channels: int, time_embed_dim: int) -> None:
        super().__init__()
        self.linear_1 = nn.Linear(in_channels, time_embed_dim, bias=True)
        self.linear_2 = nn.Linear(time_embed_dim, time_embed_dim, bias=True)

    def forward(self, sample: torch.Tensor) -> torch.Tensor:
        return self.linear_2(F.silu(self.linear_1(sample)))


class LocDiT(nn.Module):
    def __init__(self, cfg: MiniCPMConfig, in_channels: int, mu_tokens: int) -> None:
        super().__init__()
        if cfg.hidden_size % 2:
            raise ValueError("the DiT hidden size must be even (sinusoidal time embedding)")
        self.in_channels = in_channels
        self.hidden_size = cfg.hidden_size
        self.mu_tokens = mu_tokens
        self.in_proj = nn.Linear(in_channels, cfg.hidden_size, bias=True)
        self.cond_proj = nn.Linear(in_channels, cfg.hidden_size, bias=True)
        self.out_proj = nn.Linear(cfg.hidden_size, in_channels, bias=True)
        self.time_mlp = TimestepEmbedding(cfg.hidden_size, cfg.hidden_size)
        self.delta_time_mlp = TimestepEmbedding(cfg.hidden_size, cfg.hidden_size)
        self.decoder = MiniCPMModel(cfg)

    def fixed_inputs(self, cond: torch.Tensor, dt: torch.Tensor | None) -> Fixed:
        """What one solve's Euler steps share: the projected ``cond`` and, where every step's
        ``dt`` is the same (not the mean mode), its embedding; computed once per patch, the
        values each step would compute (the same operations on the same inputs)."""
        projected = self.cond_proj(cond.transpose(1, 2).contiguous())
        if dt is None:
            return projected, None
        return projected, self.delta_time_mlp(sinusoidal_embedding(dt, self.hidden_size).to(projected.dtype))

    def forward(self, x: torch.Tensor, mu: torch.Tensor, t: torch.Tensor, cond: torch.Tensor,
                dt: torch.Tensor, *, fixed: Fixed | None = None) -> torch.Tensor:
        """``x``: ``(N, C, P)``, ``mu``: ``(N, k*hidden)``, ``t``/``dt``: ``(N,)``,
        ``cond``: ``(N, C, P')``; ``fixed``: :meth:`fixed_inputs` of this ``cond`` (and ``dt``)."""
        x = self.in_proj(x.transpose(1, 2).contiguous())
        cond, dt_embedding = fixed if fixed is not None else self.fixed_inputs(cond, None)
        prefix = cond.size(1)
        temb = self.time_mlp(sinusoidal_embedding(t, self.hidden_size).to(x.dtype))
        if dt_embedding is None:
            dt_embedding = self.delta_time_mlp(sinusoidal_embedding(dt, self.hidden_size).to(x.dtype))
        temb = temb + dt_embedding
        if self.mu_tokens == 0:
            seq = torch.cat([(mu + temb).unsqueeze(1), cond, x], dim=1)
            skip = prefix + 1
        else:
            mu = mu.view(x.size(0), -1, x.size(-1))
            seq = torch.cat([mu, temb.unsqueeze(1), cond, x], dim=1)
            skip = prefix + mu.size(1) + 1
        hidden = self.decoder(seq, causal=False)
        return self.out_proj(hidden[:, skip:, :]).transpose(1, 2).contiguous()
