"""MiniCPM4 transformer stacks: the base LM, the residual LM, and the local encoder / DiT bodies.

Named as upstream (``voxcpm/modules/minicpm4/model.py``) so state dicts map 1:1:
``embed_tokens``, ``layers.N.{self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj,
input_layernorm, post_attention_layernorm}``, ``norm``. Config switches: LongRoPE or no rope
(``no_rope``), muP residual scaling (``use_mup``), GQA, ``kv_channels`` head size.

Decoding uses a static KV cache (``engine.nn.layers.kv_cache.StaticKVCache``) sized per request; a
step attends to the filled prefix only, where upstream masks the whole ``max_length`` buffer
(mathematically the same softmax, far less memory traffic).

The blocks are ``engine.nn.layers.decoder.DecoderLayer`` (weights, q/k/v projections, the SiLU MLP,
the norms). The rest stays here because it is MiniCPM's arithmetic, not the engine stack's:
muP-scaled residuals, LongRoPE computed in float32, and SDPA over the filled prefix with grouped
heads (``DecoderStack.step`` attends with an additive mask in SDPA's math-backend order, another
summation order, which would change the float32 results).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from audiocpp.engine.nn.layers import q8_block
from audiocpp.engine.nn.layers.decoder import HF_NAMES, DecoderConfig, DecoderLayer
from audiocpp.engine.nn.layers.kv_cache import StaticKVCache
from audiocpp.engine.nn.layers.longrope import longrope_cos_sin
from audiocpp.engine.nn.layers.norm import RMSNorm
from audiocpp.engine.nn.layers.rope import apply_rotary

from ..config import MiniCPMConfig

Rope = tuple[torch.Tensor, torch.Tensor]


def decoder_config(cfg: MiniCPMConfig) -> DecoderConfig:
    """A MiniCPM4 block as ``engine.nn.layers.decoder`` describes it (HF names, GQA, no biases)."""
    return DecoderConfig(dim=cfg.hidden_size, n_head=cfg.num_attention_heads,
                         n_kv_head=cfg.num_key_value_heads, head_dim=cfg.head_dim,
                         intermediate_size=cfg.intermediate_size, norm_eps=cfg.rms_norm_eps,
                         names=HF_NAMES)


class MiniCPMDecoderLayer(DecoderLayer):
    """The engine's block with MiniCPM's attention and muP residuals (``residual_scale``)."""

    def __init__(self, cfg: MiniCPMConfig) -> None:
        super().__init__(decoder_config(cfg))
        self.residual_scale = cfg.residual_scale

    def _qkv(self, x: torch.Tensor, rope: Rope | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        q, k, v = (t.transpose(1, 2) for t in self.self_attn.project(x))  # (B, heads, T, D)
        if rope is not None:
            cos, sin = rope
            q = apply_rotary(q, cos, sin, compute_dtype=torch.float32)
            k = apply_rotary(k, cos, sin, compute_dtype=torch.float32)
        return q.contiguous(), k.contiguous(), v.contiguous()

    def _out(self, attn: torch.Tensor) -> torch.Tensor:
        b, _, t, _ = attn.shape
        return self.self_attn.output(attn.transpose(1, 2).reshape(b, t, -1))

    def _add(self, residual: torch.Tensor, branch: torch.Tensor) -> torch.Tensor:
        if self.residual_scale is None:
            return residual + branch
        return residual + branch * self.residual_scale

    def _mlp(self, x: torch.Tensor) -> torch.Tensor:
        return self._add(x, self.mlp(self.post_attention_layernorm(x)))

    def forward(self, x: torch.Tensor, rope: Rope | None,
                causal: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Full-sequence attention; also returns ``k, v`` (after rope) for a cache."""
        q, k, v = self._qkv(self.input_layernorm(x), rope)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        return self._mlp(self._add(x, self._out(attn))), k, v

    def step(self, x: torch.Tensor, rope: Rope | None, caches: list[StaticKVCache], layer: int,
             positions: list[int]) -> torch.Tensor:
        """One new position per row (``x`` is ``(B, 1, hidden)``; row ``b`` at ``positions[b]`` of
        ``caches[b]``) against each row's cached prefix; projections run on all rows at once."""
        q, k, v = self._qkv(self.input_layernorm(x), rope)
        if len(caches) == 1:  # every row in one cache buffer
            attn = self._attend_cached(q, k, v, caches[0], layer, positions[0])
        else:
            attn = torch.cat([self._attend_cached(q[b:b + 1], k[b:b + 1], v[b:b + 1], cache, layer, pos)
                              for b, (cache, pos) in enumerate(zip(caches, positions))])
        return self._mlp(self._add(x, self._out(attn)))

    @staticmethod
    def _attend_cached(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: StaticKVCache, layer: int,
                       pos: int) -> torch.Tensor:
        cache.write(layer, pos, k, v)
        keys, values = cache.layer(layer)
        return F.scaled_dot_product_attention(q, keys[:, :, : pos + 1], values[:, :, : pos + 1],
                                              enable_gqa=True)


class MiniCPMModel(nn.Module):
    """A MiniCPM4 stack: optional token embedding, decoder layers, final norm, LongRoPE."""

    def __init__(self, cfg: MiniCPMConfig) -> None:
        super().__init__()
        self.config = cfg
        if cfg.vocab_size > 0:
            self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(MiniCPMDecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)

    def rope(self, start: int, length: int) -> Rope | None:
        cfg = self.config
        if cfg.no_rope:
            return None
        rs = cfg.rope_scaling
        cos, sin = longrope_cos_sin(
            cfg.head_dim, cfg.rope_theta, cfg.max_position_embeddings, rs.original_max_position_embeddings,
            rs.short_factor, rs.long_factor,
        )
        if start + length > cos.shape[0]:
            raise RuntimeError(f"position {start + length} is past max_position_embeddings {cos.shape[0]}")
        return cos[start : start + length], sin[start : start + length]

    def new_cache(self, max_length: int, *, batch_size: int = 1, dtype: torch.dtype | None = None,
                  device: torch.device | str | None = None) -> StaticKVCache:
        cfg = self.config
        weight = self.norm.weight
        return StaticKVCache(
            cfg.num_hidden_layers, cfg.num_key_value_heads, cfg.head_dim, max_length,
            batch_size=batch_size, dtype=dtype or weight.dtype, device=device or weight.device,
        )

    def forward(self, inputs_embeds: torch.Tensor, *, causal: bool = True,
                cache: StaticKVCache | None = None) -> torch.Tensor:
        """Run the whole sequence; with ``cache``, store its keys/values from position 0 (prefill)."""
        length = inputs_embeds.shape[1]
        rope = self.rope(0, length)
        if cache is not None:
            cache.check_room(0, length)
        # the same bits in one call where the kernel takes the stack (Q8_0 packages on the CPU)
        caches, starts = ([cache.buffer], [0]) if cache is not None else ((), ())
        h = q8_block.run_stack(self.layers, inputs_embeds, rope, causal=causal,
                               residual_scale=self.config.residual_scale, caches=caches, starts=starts)
        if h is None:
            h = inputs_embeds
            for i, layer in enumerate(self.layers):
                h, k, v = layer(h, rope, causal)
                if cache is not None:
                    cache.write(i, 0, k, v)
        if cache is not None:
            cache.length = length
        return self.norm(h)

    def step(self, inputs_embeds: torch.Tensor, caches: StaticKVCache | list[StaticKVCache]) -> torch.Tensor:
        """One decoding step: ``inputs_embeds`` is ``(B, 1, hidden)``, row ``b`` at position
        ``caches[b].length`` of its own cache (one cache: one row, or rows at one position)."""
        caches = [caches] if isinstance(caches, StaticKVCache) else list(caches)
        positions = [cache.length for cache in caches]
        for cache, pos in zip(caches, positions):
            if pos >= cache.max_length:
                raise RuntimeError(f"KV cache is full ({cache.max_length} positions)")
        rope = self._step_rope(positions)
        # the same bits in one call where the kernel takes the stack (its tables per row: (B, 1, D))
        table = None if rope is None else tuple(t.flatten(1, 2) if t.dim() == 4 else t for t in rope)
        h = q8_block.run_stack(self.layers, inputs_embeds, table, causal=False,
                               residual_scale=self.config.residual_scale,
                               caches=[cache.buffer for cache in caches], starts=positions, attend_cache=True)
        if h is None:
            h = inputs_embeds
            for i, layer in enumerate(self.layers):
                h = layer.step(h, rope, caches, i, positions)
        for cache, pos in zip(caches, positions):
            cache.length = pos + 1
        return self.norm(h)

    def _step_rope(self, positions: list[int]) -> Rope | None:
        """cos/sin ``(1, D)`` when every row is at one position, else ``(B, 1, 1, D)`` per row."""
        if self.config.no_rope:
            return None
        if all(p == positions[0] for p in positions):
            return self.rope(positions[0], 1)
        tables = [self.rope(p, 1) for p in positions]
        return (torch.stack([c for c, _ in tables])[:, None], torch.stack([s for _, s in tables])[:, None])
