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
- ``step(x, positions, valid)`` writes one slot and attends with the cache's precomputed mask.
  With ``attention="sdpa"`` it attends over the slots written so far (a slice of the cache: no
  growing tensors are allocated, no host sync; the work grows with the sequence, not with the
  cache's capacity) and computes what SDPA's math backend computes (q and k each scaled by
  ``scale ** 0.5``, additive mask, softmax) on grouped heads without repeating them; equal to the
  reference up to float summation order. With ``attention="eager"`` (fish-speech's non-SDPA
  path: ``q k^T / sqrt(d)``, ``masked_fill``, softmax) it is the reference's arithmetic over the
  whole (small) cache.

``DecoderStack`` and its cache are used by Audio8 TTS (Qwen slow AR, fast AR); its blocks
(``DecoderLayer``, ``Attention``, ``FeedForward``, ``DecoderConfig``) also by Audio8's codec transformer,
VoxCPM2's MiniCPM and OmniVoice's Qwen3.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from ..kernels import row_attention
from ..linear.q8_0_linear import Q8_0Linear
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


FISH_NAMES = LayerNames("attention", "feed_forward", "attention_norm", "ffn_norm", ("wqkv",), "wo",
                        ("w1", "w3", "w2"))
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
            q, k, v = apply_all([getattr(self, name) for name in n.qkv], x)
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
        g, u = apply_all([gate, up], x)
        return down(F.silu(g) * u)


def apply_all(layers: list[nn.Module], x: torch.Tensor) -> list[torch.Tensor]:
    """Each linear of ``layers`` applied to ``x``: in one kernel call where they are all block-
    quantized (``Q8_0Linear.shared_input``: the same bits, the input quantized once), else one by one."""
    shared = Q8_0Linear.shared_input(layers, x)
    return shared if shared is not None else [layer(x) for layer in layers]


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
            self.table = interleaved_rope_table(length, cfg.head_dim, cfg.rope_base, cfg.rope_table_dtype,
                                                device)
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


class DecoderCache:
    """The static KV cache of one generation of a :class:`DecoderStack` (``B`` rows, ``S`` slots)."""

    def __init__(self, num_layers: int, cfg: DecoderConfig, batch_size: int, max_length: int, *,
                 dtype: torch.dtype, device: torch.device) -> None:
        shape = (num_layers, batch_size, cfg.n_kv_head, max_length, cfg.head_dim)
        self.keys = torch.zeros(shape, dtype=dtype, device=device)  # [L, B, H_kv, S, D]
        self.values = torch.zeros(shape, dtype=dtype, device=device)
        self.mask_add = torch.empty((batch_size, 1, 1, max_length), dtype=dtype, device=device)  # 0 / -inf
        self.valid = torch.empty((batch_size, max_length), dtype=torch.bool, device=device)
        self.length = 0
        self.reset()

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.keys.shape)

    @property
    def capacity(self) -> int:
        return int(self.keys.shape[3])

    def reset(self) -> None:
        """Rewind to slot 0; later slots keep stale values but are masked until rewritten."""
        self.length = 0
        self.mask_add.fill_(float("-inf"))
        self.valid.fill_(False)

    def mark(self, start: int, valid: torch.Tensor) -> None:
        end = start + valid.shape[1]
        if end > self.capacity:
            raise RuntimeError(f"KV cache overflow: {end} positions > capacity {self.capacity}")
        bits = valid.to(torch.bool)
        self.valid[:, start:end] = bits
        self.mask_add[:, 0, 0, start:end] = torch.where(bits, 0.0, float("-inf")).to(self.mask_add.dtype)


class DecoderStack:
    """Runs ``layers`` with a static KV cache; not a module (the owner holds the layers).

    The stack keeps one cache of its own (:meth:`setup`, used when no ``cache=`` is given);
    rows of a continuous batch each hold their own (:meth:`new_cache`, one row each) and step
    together through :meth:`step_rows`.
    """

    def __init__(self, layers: nn.ModuleList, cfg: DecoderConfig, max_positions: int) -> None:
        self.layers, self.cfg, self.max_positions = layers, cfg, int(max_positions)
        self.rope: RopeTable | None = None
        self.cache: DecoderCache | None = None

    # the stack's own cache, by its old names
    keys = property(lambda self: None if self.cache is None else self.cache.keys)
    values = property(lambda self: None if self.cache is None else self.cache.values)
    mask_add = property(lambda self: None if self.cache is None else self.cache.mask_add)
    valid = property(lambda self: None if self.cache is None else self.cache.valid)

    @property
    def length(self) -> int:
        return 0 if self.cache is None else self.cache.length

    def new_cache(self, batch_size: int, max_length: int, *, dtype: torch.dtype | None = None,
                  device: torch.device | None = None) -> DecoderCache:
        """A cache for ``max_length`` slots of ``batch_size`` rows (in the layers' dtype and device)."""
        ref = next(self.layers.parameters())
        dtype, device = dtype or ref.dtype, device or ref.device
        if self.rope is None or self.rope.table.device != device:
            self.rope = RopeTable(self.cfg, self.max_positions, device)
        return DecoderCache(len(self.layers), self.cfg, batch_size, max_length, dtype=dtype, device=device)

    def setup(self, batch_size: int, max_length: int, *, dtype: torch.dtype | None = None,
              device: torch.device | None = None) -> None:
        """Allocate (or reuse, when the shape is unchanged) the stack's own cache for ``max_length`` slots."""
        ref = next(self.layers.parameters())
        dtype, device = dtype or ref.dtype, device or ref.device
        shape = (len(self.layers), batch_size, self.cfg.n_kv_head, max_length, self.cfg.head_dim)
        cache = self.cache
        if cache is None or cache.shape != shape or cache.keys.dtype != dtype or cache.keys.device != device:
            self.cache = self.new_cache(batch_size, max_length, dtype=dtype, device=device)
        self.reset()

    def reset(self) -> None:
        """Rewind the stack's own cache to slot 0."""
        assert self.cache is not None, "setup() first"
        self.cache.reset()

    def release(self) -> None:
        self.cache = None

    @property
    def capacity(self) -> int:
        return 0 if self.cache is None else self.cache.capacity

    def _own(self, cache: DecoderCache | None) -> DecoderCache:
        cache = cache or self.cache
        assert self.rope is not None and cache is not None, "setup() first"
        return cache

    # -- prefill ----------------------------------------------------------------------------
    def prefill(self, x: torch.Tensor, positions: torch.Tensor, key_mask: torch.Tensor,
                cache: DecoderCache | None = None) -> torch.Tensor:
        """Run ``x`` ``[B, T, dim]`` (left-padded rows: ``key_mask`` ``[B, T]``) from slot 0."""
        cache = self._own(cache)
        b, t, _ = x.shape
        cache.length = 0
        cache.mark(0, key_mask)
        slots = torch.arange(t, device=x.device)
        causal = slots[None, :] <= slots[:, None]
        mask = causal[None, None] & key_mask[:, None, None, :].bool()
        rope = self.rope.gather(positions)
        for i, layer in enumerate(self.layers):
            x = self._layer(i, layer, x, rope, mask, [cache], [0])
        cache.length = t
        return x

    # -- one step ---------------------------------------------------------------------------
    def step(self, x: torch.Tensor, positions: torch.Tensor, valid: torch.Tensor,
             cache: DecoderCache | None = None) -> torch.Tensor:
        """Run one column ``x`` ``[B, 1, dim]`` at the next slot; ``valid`` ``[B, 1]`` its mask bit."""
        cache = self._own(cache)
        slot = cache.length
        cache.mark(slot, valid)
        rope = self.rope.gather(positions)
        for i, layer in enumerate(self.layers):
            x = self._layer(i, layer, x, rope, None, [cache], [slot])
        cache.length = slot + 1
        return x

    def step_rows(self, x: torch.Tensor, positions: torch.Tensor, caches: list[DecoderCache]) -> torch.Tensor:
        """One column per row, ``x`` ``[B, 1, dim]``, row ``b`` at the next slot of ``caches[b]``
        (a one-row cache each; rotary ``positions`` ``[B, 1]``): the projections and MLPs run on
        all rows at once, attention row by row over each row's own cache, as it runs alone."""
        if len(caches) == 1:
            return self.step(x, positions, torch.ones_like(positions), caches[0])
        assert self.rope is not None, "new_cache() first"
        slots = [cache.length for cache in caches]
        ones = torch.ones_like(positions[:1])
        for cache, slot in zip(caches, slots):
            cache.mark(slot, ones)
        rope = self.rope.gather(positions)
        for i, layer in enumerate(self.layers):
            x = self._layer(i, layer, x, rope, None, caches, slots)
        for cache, slot in zip(caches, slots):
            cache.length = slot + 1
        return x

    def _layer(self, i: int, layer: DecoderLayer, x: torch.Tensor, rope: torch.Tensor,
               mask: torch.Tensor | None, caches: list[DecoderCache], slots: list[int]) -> torch.Tensor:
        cfg = self.cfg
        attn = layer.attn
        b, t, _ = x.shape
        q, k, v = attn.project(layer.attention_input(x))
        q = self.rope.apply(q, rope).transpose(1, 2)
        k = self.rope.apply(k, rope).transpose(1, 2)
        v = v.transpose(1, 2)
        if len(caches) == 1:  # every row in one cache
            out = self._attend(i, q, k, v, mask, caches[0], slots[0])
        else:
            out = self._attend_rows(i, q, k, v, caches, slots)
        out = out.transpose(1, 2).contiguous().view(b, t, cfg.n_head * cfg.head_dim)
        return layer.mlp_block(x + attn.output(out))

    def _attend_rows(self, i: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     caches: list[DecoderCache], slots: list[int]) -> torch.Tensor:
        """Each row over its own cache, as :meth:`_attend` alone; in one C++ call on the CPU
        (``engine.nn.kernels.row_attention``: the same ATen calls as its Python loop, so the same bits)."""
        if self.cfg.attention == "eager":
            return torch.cat([self._attend(i, q[r:r + 1], k[r:r + 1], v[r:r + 1], None, cache, slot)
                              for r, (cache, slot) in enumerate(zip(caches, slots))])
        op = row_attention.kernel() if q.device.type == "cpu" else None
        return (op or row_attention.attend_rows_python)(
            q, k, v, [c.keys for c in caches], [c.values for c in caches], [c.mask_add for c in caches],
            i, slots, self.key_scale, self.cfg.n_kv_head, self.cfg.n_rep)

    def _attend(self, i: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                cache: DecoderCache, slot: int) -> torch.Tensor:
        t = q.shape[2]
        keys, values = cache.keys[i], cache.values[i]
        k = k.to(keys.dtype)
        eager = self.cfg.attention == "eager"
        # the grouped steps' keys are kept scaled by SDPA's factor: the product each step would take
        # of the whole cache (the same rounding, once per key instead of once per step)
        keys[:, :, slot:slot + t] = k if eager else k * self.key_scale
        values[:, :, slot:slot + t] = v
        if mask is not None:  # prefill: the written prefix, as the reference caches return it
            return self._attend_prefill(q, k, values[:, :, :t], mask)
        if eager:  # fish-speech's fast AR: a cache of ten slots
            return self._attend_eager(q, keys, values, cache.valid[:, None, None, :])
        # a step attends over the slots written so far (the rest is masked): the work grows with
        # the sequence, not with the cache's capacity. (The eager path keeps the whole cache: its
        # rows share one cache in a batch, and bf16 matmuls over a strided slice round a batch's
        # rows otherwise than a lone row's.)
        end = slot + t
        return self._attend_grouped(q, keys[:, :, :end], values[:, :, :end], cache.mask_add[..., :end])

    def _attend_prefill(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                        mask: torch.Tensor) -> torch.Tensor:
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

    @property
    def key_scale(self) -> float:
        """SDPA's math backend scales queries and keys each by ``sqrt(1 / sqrt(head_dim))``."""
        return math.sqrt(1.0 / math.sqrt(self.cfg.head_dim))

    def _attend_grouped(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                        mask_add: torch.Tensor | None = None) -> torch.Tensor:
        """SDPA math-backend arithmetic over the whole cache, grouped heads not repeated; ``k`` is
        already scaled by :attr:`key_scale` (as the cache keeps it)."""
        cfg = self.cfg
        b, _, t, d = q.shape
        qg = (q * self.key_scale).reshape(b, cfg.n_kv_head, cfg.n_rep * t, d)
        scores = qg @ k.transpose(-2, -1)
        scores.add_(self.mask_add if mask_add is None else mask_add)
        out = torch.softmax(scores, dim=-1) @ v
        return out.view(b, cfg.n_head, t, d)
