"""A causal decoder stack with a static KV cache (Llama / Qwen / fish-speech style blocks).

Blocks are pre-norm: ``h = x + attn(norm(x))``, ``out = h + mlp(norm(h))`` with a SiLU-gated
MLP. What varies between models is a :class:`DecoderConfig`: grouped KV heads, a fused
``wqkv`` or separate ``q/k/v`` projections, biases, per-head qk-norm, the RoPE convention
(interleaved pairs or rotate-half) and the dtype of its table, the attention kernel, and the
parameter names (:data:`FISH_NAMES`, :data:`HF_NAMES`) so state dicts load by name.

:class:`DecoderStack` runs a list of :class:`DecoderLayer` (held by the owning module under its
own name, e.g. ``layers`` or ``fast_layers``) against a static cache and owns the write
position:

- ``setup(batch, max_length)`` allocates the cache once per generation; ``reset()`` rewinds
  the position without freeing it (a per-frame decoder reuses its slots);
- ``prefill(x, positions, key_mask)`` writes slots ``0..T-1``; with ``attention="sdpa"`` it calls
  ``scaled_dot_product_attention`` with the boolean mask ``causal & key_mask`` and the grouped
  heads repeated, exactly as the reference implementations do;
- ``step(x, positions, valid)`` writes one slot and attends over the whole cache with a
  precomputed additive mask: every step has the same shapes (no growing tensors, no host
  sync). With ``attention="sdpa"`` it computes what SDPA's math backend computes (q and k each
  scaled by ``scale ** 0.5``, additive mask, softmax) on grouped heads without repeating them;
  equal to the reference up to float summation order. With ``attention="eager"`` (fish-speech's
  non-SDPA path: ``q k^T / sqrt(d)``, ``masked_fill``, softmax) it is the reference's arithmetic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from .attention import repeat_kv
from .norm import RMSNorm
from .rope import apply_interleaved_rope, apply_rotary, interleaved_rope_table, rope_inv_freq


@dataclass(frozen=True)
class LayerNames:
    """Parameter names of a block: submodules and their linears."""

    attention: str
    feed_forward: str
    attention_norm: str
    ffn_norm: str
    qkv: tuple[str, ...]  # one name: fused [q; k; v]; three names: separate projections
    out: str
    mlp: tuple[str, str, str]  # gate, up, down
    q_norm: str = "q_norm"
    k_norm: str = "k_norm"


FISH_NAMES = LayerNames("attention", "feed_forward", "attention_norm", "ffn_norm", ("wqkv",), "wo", ("w1", "w3", "w2"))
HF_NAMES = LayerNames("self_attn", "mlp", "input_layernorm", "post_attention_layernorm",
                      ("q_proj", "k_proj", "v_proj"), "o_proj", ("gate_proj", "up_proj", "down_proj"))


@dataclass(frozen=True)
class DecoderConfig:
    dim: int
    n_head: int
    n_kv_head: int
    head_dim: int
    intermediate_size: int
    norm_eps: float = 1e-6
    qkv_bias: bool = False
    o_bias: bool = False
    qk_norm: bool = False
    rope_style: Literal["interleaved", "rotate_half"] = "rotate_half"
    rope_base: float = 10000.0
    rope_table_dtype: torch.dtype = torch.float32
    attention: Literal["sdpa", "eager"] = "sdpa"
    names: LayerNames = HF_NAMES

    @property
    def n_rep(self) -> int:
        return self.n_head // self.n_kv_head


class Attention(nn.Module):
    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.cfg = cfg
        n = cfg.names
        q_size, kv_size = cfg.n_head * cfg.head_dim, cfg.n_kv_head * cfg.head_dim
        if len(n.qkv) == 1:
            setattr(self, n.qkv[0], nn.Linear(cfg.dim, q_size + 2 * kv_size, bias=cfg.qkv_bias))
        else:
            for name, size in zip(n.qkv, (q_size, kv_size, kv_size)):
                setattr(self, name, nn.Linear(cfg.dim, size, bias=cfg.qkv_bias))
        setattr(self, n.out, nn.Linear(q_size, cfg.dim, bias=cfg.o_bias))
        if cfg.qk_norm:
            setattr(self, n.q_norm, RMSNorm(cfg.head_dim, cfg.norm_eps))
            setattr(self, n.k_norm, RMSNorm(cfg.head_dim, cfg.norm_eps))

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v as ``[B, T, heads, head_dim]`` (qk-normed when configured, no RoPE)."""
        cfg, n = self.cfg, self.cfg.names
        b, t, _ = x.shape
        q_size, kv_size = cfg.n_head * cfg.head_dim, cfg.n_kv_head * cfg.head_dim
        if len(n.qkv) == 1:
            q, k, v = getattr(self, n.qkv[0])(x).split((q_size, kv_size, kv_size), dim=-1)
        else:
            q, k, v = (getattr(self, name)(x) for name in n.qkv)
        q = q.view(b, t, cfg.n_head, cfg.head_dim)
        k = k.view(b, t, cfg.n_kv_head, cfg.head_dim)
        v = v.view(b, t, cfg.n_kv_head, cfg.head_dim)
        if cfg.qk_norm:
            q, k = getattr(self, n.q_norm)(q), getattr(self, n.k_norm)(k)
        return q, k, v

    def output(self, x: torch.Tensor) -> torch.Tensor:
        return getattr(self, self.cfg.names.out)(x)


class FeedForward(nn.Module):
    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.names = cfg.names.mlp
        gate, up, down = self.names
        setattr(self, gate, nn.Linear(cfg.dim, cfg.intermediate_size, bias=False))
        setattr(self, up, nn.Linear(cfg.dim, cfg.intermediate_size, bias=False))
        setattr(self, down, nn.Linear(cfg.intermediate_size, cfg.dim, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up, down = (getattr(self, n) for n in self.names)
        return down(F.silu(gate(x)) * up(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.cfg = cfg
        n = cfg.names
        setattr(self, n.attention, Attention(cfg))
        setattr(self, n.feed_forward, FeedForward(cfg))
        setattr(self, n.attention_norm, RMSNorm(cfg.dim, cfg.norm_eps))
        setattr(self, n.ffn_norm, RMSNorm(cfg.dim, cfg.norm_eps))

    @property
    def attn(self) -> Attention:
        return getattr(self, self.cfg.names.attention)

    def mlp_block(self, h: torch.Tensor) -> torch.Tensor:
        n = self.cfg.names
        return h + getattr(self, n.feed_forward)(getattr(self, n.ffn_norm)(h))

    def attention_input(self, x: torch.Tensor) -> torch.Tensor:
        return getattr(self, self.cfg.names.attention_norm)(x)


class RopeTable:
    """The rotary table of a stack for positions ``0..length-1``, gathered per row."""

    def __init__(self, cfg: DecoderConfig, length: int, device: torch.device) -> None:
        self.style = cfg.rope_style
        if cfg.rope_style == "interleaved":
            self.table = interleaved_rope_table(length, cfg.head_dim, cfg.rope_base, cfg.rope_table_dtype, device)
        else:
            inv = rope_inv_freq(cfg.head_dim, cfg.rope_base).to(device)
            freqs = torch.outer(torch.arange(length, device=device, dtype=torch.float32), inv)
            emb = torch.cat((freqs, freqs), dim=-1)
            self.table = torch.stack((emb.cos(), emb.sin())).to(cfg.rope_table_dtype)

    def gather(self, positions: torch.Tensor) -> torch.Tensor:
        """``positions`` ``[B, T]`` -> interleaved ``[B, T, D/2, 2]`` or rotate-half ``[2, B, T, 1, D]``."""
        if self.style == "interleaved":
            return self.table[positions]
        return self.table[:, positions].unsqueeze(3)

    def apply(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        """Rotate ``x`` ``[B, T, H, D]``."""
        if self.style == "interleaved":
            return apply_interleaved_rope(x, rope)
        return apply_rotary(x, rope[0], rope[1])


class DecoderStack:
    """Runs ``layers`` with a static KV cache; not a module (the owner holds the layers)."""

    def __init__(self, layers: nn.ModuleList, cfg: DecoderConfig, max_positions: int) -> None:
        self.layers, self.cfg, self.max_positions = layers, cfg, int(max_positions)
        self.rope: RopeTable | None = None
        self.keys: torch.Tensor | None = None  # [L, B, H_kv, S, D]
        self.values: torch.Tensor | None = None
        self.mask_add: torch.Tensor | None = None  # [B, 1, 1, S]: 0 = attend, -inf = masked
        self.valid: torch.Tensor | None = None  # [B, S] bool
        self.length = 0

    def setup(self, batch_size: int, max_length: int, *, dtype: torch.dtype | None = None,
              device: torch.device | None = None) -> None:
        """Allocate (or reuse, when the shape is unchanged) the cache for ``max_length`` slots."""
        ref = next(self.layers.parameters())
        dtype, device = dtype or ref.dtype, device or ref.device
        cfg = self.cfg
        shape = (len(self.layers), batch_size, cfg.n_kv_head, max_length, cfg.head_dim)
        if self.keys is None or tuple(self.keys.shape) != shape or self.keys.dtype != dtype \
                or self.keys.device != device:
            self.keys = torch.zeros(shape, dtype=dtype, device=device)
            self.values = torch.zeros(shape, dtype=dtype, device=device)
            self.mask_add = torch.empty((batch_size, 1, 1, max_length), dtype=dtype, device=device)
            self.valid = torch.empty((batch_size, max_length), dtype=torch.bool, device=device)
        if self.rope is None or self.rope.table.device != device:
            self.rope = RopeTable(cfg, self.max_positions, device)
        self.reset()

    def reset(self) -> None:
        """Rewind to slot 0; later slots keep stale values but are masked until rewritten."""
        assert self.mask_add is not None and self.valid is not None, "setup() first"
        self.length = 0
        self.mask_add.fill_(float("-inf"))
        self.valid.fill_(False)

    def release(self) -> None:
        self.keys = self.values = self.mask_add = self.valid = None
        self.length = 0

    @property
    def capacity(self) -> int:
        return 0 if self.keys is None else int(self.keys.shape[3])

    def _mark(self, start: int, valid: torch.Tensor) -> None:
        end = start + valid.shape[1]
        if end > self.capacity:
            raise RuntimeError(f"KV cache overflow: {end} positions > capacity {self.capacity}")
        bits = valid.to(torch.bool)
        self.valid[:, start:end] = bits
        self.mask_add[:, 0, 0, start:end] = torch.where(bits, 0.0, float("-inf")).to(self.mask_add.dtype)

    # -- prefill ----------------------------------------------------------------------------
    def prefill(self, x: torch.Tensor, positions: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        """Run ``x`` ``[B, T, dim]`` (left-padded rows: ``key_mask`` ``[B, T]``) from slot 0."""
        assert self.rope is not None and self.keys is not None, "setup() first"
        b, t, _ = x.shape
        self.length = 0
        self._mark(0, key_mask)
        slots = torch.arange(t, device=x.device)
        causal = slots[None, :] <= slots[:, None]
        mask = causal[None, None] & key_mask[:, None, None, :].bool()
        rope = self.rope.gather(positions)
        for i, layer in enumerate(self.layers):
            x = self._layer(i, layer, x, rope, mask, 0)
        self.length = t
        return x

    # -- one step ---------------------------------------------------------------------------
    def step(self, x: torch.Tensor, positions: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """Run one column ``x`` ``[B, 1, dim]`` at the next slot; ``valid`` ``[B, 1]`` its mask bit."""
        assert self.rope is not None and self.keys is not None, "setup() first"
        slot = self.length
        self._mark(slot, valid)
        rope = self.rope.gather(positions)
        for i, layer in enumerate(self.layers):
            x = self._layer(i, layer, x, rope, None, slot)
        self.length = slot + 1
        return x

    def _layer(self, i: int, layer: DecoderLayer, x: torch.Tensor, rope: torch.Tensor,
               mask: torch.Tensor | None, slot: int) -> torch.Tensor:
        cfg = self.cfg
        attn = layer.attn
        b, t, _ = x.shape
        q, k, v = attn.project(layer.attention_input(x))
        q = self.rope.apply(q, rope).transpose(1, 2)
        k = self.rope.apply(k, rope).transpose(1, 2)
        v = v.transpose(1, 2)
        keys, values = self.keys[i], self.values[i]
        keys[:, :, slot:slot + t] = k
        values[:, :, slot:slot + t] = v
        if mask is not None:  # prefill: the written prefix, as the reference caches return it
            out = self._attend_prefill(q, keys[:, :, :t], values[:, :, :t], mask)
        elif cfg.attention == "eager":
            out = self._attend_eager(q, keys, values, self.valid[:, None, None, :])
        else:
            out = self._attend_grouped(q, keys, values)
        out = out.transpose(1, 2).contiguous().view(b, t, cfg.n_head * cfg.head_dim)
        return layer.mlp_block(x + attn.output(out))

    def _attend_prefill(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        k, v = repeat_kv(k, self.cfg.n_rep), repeat_kv(v, self.cfg.n_rep)
        if self.cfg.attention == "eager":
            return self._attend_eager(q, k, v, mask, repeated=True)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    def _attend_eager(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
                      repeated: bool = False) -> torch.Tensor:
        if not repeated:
            k, v = repeat_kv(k, self.cfg.n_rep), repeat_kv(v, self.cfg.n_rep)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.cfg.head_dim)
        scores = scores.masked_fill(~mask, float("-inf"))
        return torch.softmax(scores, dim=-1) @ v

    def _attend_grouped(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """SDPA math-backend arithmetic over the whole cache, grouped heads not repeated."""
        cfg = self.cfg
        b, _, t, d = q.shape
        factor = math.sqrt(1.0 / math.sqrt(d))
        qg = (q * factor).reshape(b, cfg.n_kv_head, cfg.n_rep * t, d)
        scores = qg @ (k * factor).transpose(-2, -1)
        scores.add_(self.mask_add)
        out = torch.softmax(scores, dim=-1) @ v
        return out.view(b, cfg.n_head, t, d)
