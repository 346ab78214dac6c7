"""The codec's window transformer (upstream ``ArkttsCodecWindowTransformer``): pre-norm blocks
with LayerScale, no biases, interleaved RoPE (base 1e4, bfloat16 table), attention causal within
a window of frames. Channels-first in and out.

``stream(x, state)`` runs new frames against cached keys/values of the last ``window - 1``
frames at their absolute positions (the same RoPE angles as the offline pass).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from audiocpp.engine.nn.layers.attention import repeat_kv
from audiocpp.engine.nn.layers.decoder import FISH_NAMES, Attention, DecoderConfig, FeedForward
from audiocpp.engine.nn.layers.norm import RMSNorm
from audiocpp.engine.nn.layers.rope import apply_interleaved_rope, interleaved_rope_table

ROPE_BASE = 10000.0
NORM_EPS = 1e-5


@dataclass(frozen=True)
class WindowTransformerConfig:
    n_layer: int
    n_head: int
    dim: int
    intermediate_size: int
    n_local_heads: int = -1
    head_dim: int = 64
    window: int | None = None

    def decoder_config(self) -> DecoderConfig:
        kv = self.n_head if self.n_local_heads == -1 else self.n_local_heads
        return DecoderConfig(dim=self.dim, n_head=self.n_head, n_kv_head=kv, head_dim=self.head_dim,
                             intermediate_size=self.intermediate_size, norm_eps=NORM_EPS,
                             rope_style="interleaved", rope_base=ROPE_BASE, rope_table_dtype=torch.bfloat16,
                             names=FISH_NAMES)


class LayerScale(nn.Module):
    def __init__(self, dim: int, init_values: float = 1e-2) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.full((dim,), init_values))  # no arithmetic on meta: it imports dynamo

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gamma


class TransformerBlock(nn.Module):
    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.attention = Attention(cfg)
        self.feed_forward = FeedForward(cfg)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attention_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attention_layer_scale = LayerScale(cfg.dim)
        self.ffn_layer_scale = LayerScale(cfg.dim)

    def attend(self, x: torch.Tensor, rope: torch.Tensor, mask: torch.Tensor,
               past: tuple[torch.Tensor, torch.Tensor] | None = None
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Attention output for ``x`` ``[B, T, dim]`` and its (k, v) (past ones prepended)."""
        cfg = self.cfg
        b, t, _ = x.shape
        q, k, v = self.attention.project(x)
        q = apply_interleaved_rope(q, rope).transpose(1, 2)
        k = apply_interleaved_rope(k, rope).transpose(1, 2)
        v = v.transpose(1, 2)
        if past is not None:
            k, v = torch.cat((past[0], k), dim=2), torch.cat((past[1], v), dim=2)
        out = F.scaled_dot_product_attention(q, repeat_kv(k, cfg.n_rep), repeat_kv(v, cfg.n_rep),
                                             attn_mask=mask)
        out = out.transpose(1, 2).contiguous().view(b, t, cfg.n_head * cfg.head_dim)
        return self.attention.output(out), k, v

    def finish(self, x: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        hidden = x + self.attention_layer_scale(attended)
        return hidden + self.ffn_layer_scale(self.feed_forward(self.ffn_norm(hidden)))


class WindowTransformer(nn.Module):
    def __init__(self, cfg: WindowTransformerConfig) -> None:
        super().__init__()
        self.window = cfg.window
        dcfg = cfg.decoder_config()
        self.head_dim = cfg.head_dim
        self.layers = nn.ModuleList(TransformerBlock(dcfg) for _ in range(cfg.n_layer))
        self.norm = RMSNorm(cfg.dim, NORM_EPS)

    def _mask(self, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        mask = cols[None, :] <= rows[:, None]
        if self.window is not None:
            mask &= cols[None, :] >= (rows[:, None] - self.window + 1).clamp_min(0)
        return mask[None, None]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.transpose(1, 2)
        length = x.shape[1]
        pos = torch.arange(length, device=x.device)
        mask = self._mask(pos, pos)
        rope = interleaved_rope_table(length, self.head_dim, ROPE_BASE, torch.bfloat16, x.device)
        for layer in self.layers:
            attended, _, _ = layer.attend(layer.attention_norm(x), rope, mask)
            x = layer.finish(x, attended)
        return self.norm(x).transpose(1, 2)

    def stream(self, x: torch.Tensor, state: dict) -> torch.Tensor:
        """The outputs of the next frames ``x`` ``[B, C, n]`` (keys/values of earlier calls cached)."""
        x = x.transpose(1, 2)
        start = state.get((self, "offset"), 0)
        n = x.shape[1]
        end = start + n
        keep = (self.window - 1) if self.window is not None else None
        past_len = state[(self, 0)][0].shape[2] if (self, 0) in state else 0
        rows = torch.arange(start, end, device=x.device)
        cols = torch.arange(start - past_len, end, device=x.device)
        mask = self._mask(rows, cols)
        rope = interleaved_rope_table(end, self.head_dim, ROPE_BASE, torch.bfloat16, x.device)[start:end]
        for i, layer in enumerate(self.layers):
            attended, k, v = layer.attend(layer.attention_norm(x), rope, mask, state.get((self, i)))
            if keep is not None:
                k, v = k[:, :, -keep:] if keep else k[:, :, :0], v[:, :, -keep:] if keep else v[:, :, :0]
            state[(self, i)] = (k, v)
            x = layer.finish(x, attended)
        state[(self, "offset")] = end
        return self.norm(x).transpose(1, 2)
