"""The Audio8 TTS 0.1B slow AR: a Falcon-H1 hybrid backbone and the compact semantic head.

Every layer runs a Mamba2 mixer and GQA attention side by side on the same normed input, adds
both to the residual, then the SwiGLU MLP (transformers' ``FalconH1DecoderLayer``). Attention
uses rotate-half RoPE (base 1e11 in the real checkpoint). Module names follow the checkpoint
(``slow.embed_tokens``, ``slow.layers.N.{mamba, self_attn, feed_forward, input_layernorm,
pre_ff_layernorm}``, ``slow.final_layernorm``, ``semantic_output``), so state dicts map 1:1.

The 0.1B wrapper feeds ``FalconH1Model`` an embedding it builds itself: the text embedding plus
the masked codebook sum, times ``embedding_multiplier`` applied to the whole sum
(``shared/reference/audio8_tts.md`` section 5). ``last_hidden_state`` (after
``final_layernorm``) feeds both ``semantic_output`` (4097 compact logits: index i is semantic
token ``semantic_begin_id + i``, index 4096 is EOS) and the fast AR. Every muP multiplier of the
config is honoured; ``lm_head_multiplier`` is not used by the wrapper (it has its own head).

Caches are static: a :class:`~audiocpp.engine.nn.mamba2.Mamba2Cache` for the conv and SSM
states and a :class:`~audiocpp.engine.nn.kv_cache.StaticKVCache` for attention. A prompt runs
through :meth:`FalconH1Backbone.prefill` (chunked SSD scan, causal attention); every later token
through :meth:`FalconH1Backbone.step` (recurrent state update, attention over the filled prefix).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from audiocpp.engine.nn.kv_cache import StaticKVCache
from audiocpp.engine.nn.mamba2 import Mamba2Cache, Mamba2Mixer
from audiocpp.engine.nn.mlp import SwiGLU
from audiocpp.engine.nn.norm import RMSNorm
from audiocpp.engine.nn.rope import apply_rotary, rope_inv_freq

Rope = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class FalconH1Config:
    """The Falcon-H1 fields of an arktts ``config.json`` (``slow_backbone == "falcon_h1"``)."""

    vocab_size: int
    dim: int
    n_layer: int
    n_head: int
    n_local_heads: int
    head_dim: int
    intermediate_size: int
    max_seq_len: int = 2048
    rope_base: float = 1e11
    norm_eps: float = 1e-5
    codebook_size: int = 4096
    attention_bias: bool = False
    mlp_bias: bool = False
    projectors_bias: bool = False
    mamba_d_ssm: int = 768
    mamba_n_heads: int = 24
    mamba_d_head: int = 32
    mamba_d_state: int = 64
    mamba_n_groups: int = 1
    mamba_d_conv: int = 4
    mamba_chunk_size: int = 128
    mamba_conv_bias: bool = True
    mamba_proj_bias: bool = False
    mamba_rms_norm: bool = False
    mamba_norm_before_gate: bool = False
    embedding_multiplier: float = 1.0
    attention_in_multiplier: float = 1.0
    attention_out_multiplier: float = 1.0
    key_multiplier: float = 1.0
    ssm_in_multiplier: float = 1.0
    ssm_out_multiplier: float = 1.0
    ssm_multipliers: tuple[float, ...] = field(default=(1.0, 1.0, 1.0, 1.0, 1.0))
    mlp_multipliers: tuple[float, ...] = field(default=(1.0, 1.0))

    @classmethod
    def from_dict(cls, cfg: Mapping[str, Any]) -> FalconH1Config:
        """Read an arktts config dict; keys absent take the 0.1B wrapper's defaults."""
        if cfg.get("hidden_act", "silu") != "silu":
            raise ValueError(f"falcon_h1 slow AR supports hidden_act 'silu', not {cfg['hidden_act']!r}")
        d_ssm = cfg.get("mamba_d_ssm")
        if d_ssm is None:
            d_ssm = int(cfg.get("mamba_expand", 2) * cfg["dim"])
        kwargs: dict[str, Any] = {"mamba_d_ssm": int(d_ssm)}
        for name, kind in cls.__annotations__.items():
            if name in kwargs or name not in cfg or cfg[name] is None:
                continue
            value = cfg[name]
            if name in ("ssm_multipliers", "mlp_multipliers"):
                value = tuple(float(v) for v in value)
            elif kind == "int":
                value = int(value)
            elif kind == "float":
                value = float(value)
            elif kind == "bool":
                value = bool(value)
            kwargs[name] = value
        config = cls(**kwargs)
        if len(config.ssm_multipliers) != 5 or len(config.mlp_multipliers) != 2:
            raise ValueError("ssm_multipliers needs 5 values and mlp_multipliers 2")
        return config


class FalconH1Attention(nn.Module):
    def __init__(self, cfg: FalconH1Config) -> None:
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = cfg.n_head, cfg.n_local_heads, cfg.head_dim
        bias = cfg.attention_bias
        self.q_proj = nn.Linear(cfg.dim, cfg.n_head * cfg.head_dim, bias=bias)
        self.k_proj = nn.Linear(cfg.dim, cfg.n_local_heads * cfg.head_dim, bias=bias)
        self.v_proj = nn.Linear(cfg.dim, cfg.n_local_heads * cfg.head_dim, bias=bias)
        self.o_proj = nn.Linear(cfg.n_head * cfg.head_dim, cfg.dim, bias=bias)
        self.key_multiplier = cfg.key_multiplier
        self.scale = cfg.head_dim ** -0.5

    def _qkv(self, x: torch.Tensor, rope: Rope) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, -1, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, -1, self.head_dim).transpose(1, 2)
        if self.key_multiplier != 1.0:
            k = k * self.key_multiplier
        v = self.v_proj(x).view(b, t, -1, self.head_dim).transpose(1, 2)
        cos, sin = rope
        return apply_rotary(q, cos, sin), apply_rotary(k, cos, sin), v

    def _out(self, attn: torch.Tensor) -> torch.Tensor:
        b, _, t, _ = attn.shape
        return self.o_proj(attn.transpose(1, 2).reshape(b, t, -1))

    def forward(self, x: torch.Tensor, rope: Rope, cache: StaticKVCache | None, layer: int) -> torch.Tensor:
        """Causal attention over the whole prompt (positions from 0); stores K/V in ``cache``."""
        q, k, v = self._qkv(x, rope)
        if cache is not None:
            cache.write(layer, 0, k, v)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=q.shape[2] > 1, scale=self.scale,
                                              enable_gqa=True)
        return self._out(attn)

    def step(self, x: torch.Tensor, rope: Rope, cache: StaticKVCache, layer: int, pos: int) -> torch.Tensor:
        """One new position ``pos`` against the cached prefix."""
        q, k, v = self._qkv(x, rope)
        cache.write(layer, pos, k, v)
        keys, values = cache.layer(layer)
        attn = F.scaled_dot_product_attention(q, keys[:, :, : pos + 1], values[:, :, : pos + 1],
                                              scale=self.scale, enable_gqa=True)
        return self._out(attn)


class FalconH1MLP(SwiGLU):
    """SwiGLU with Falcon-H1's ``mlp_multipliers`` (gate input, down output)."""

    def __init__(self, cfg: FalconH1Config) -> None:
        super().__init__(cfg.dim, cfg.intermediate_size, bias=cfg.mlp_bias)
        self.gate_multiplier, self.down_multiplier = cfg.mlp_multipliers

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate_multiplier == 1.0 and self.down_multiplier == 1.0:
            return super().forward(x)
        y = self.up_proj(x) * F.silu(self.gate_proj(x) * self.gate_multiplier)
        return self.down_proj(y) * self.down_multiplier


class FalconH1Layer(nn.Module):
    def __init__(self, cfg: FalconH1Config) -> None:
        super().__init__()
        self.feed_forward = FalconH1MLP(cfg)
        self.mamba = Mamba2Mixer(
            cfg.dim, cfg.mamba_d_ssm, cfg.mamba_n_heads, cfg.mamba_d_head, cfg.mamba_d_state,
            n_groups=cfg.mamba_n_groups, d_conv=cfg.mamba_d_conv, chunk_size=cfg.mamba_chunk_size,
            conv_bias=cfg.mamba_conv_bias, proj_bias=cfg.mamba_proj_bias, out_bias=cfg.projectors_bias,
            rms_norm=cfg.mamba_rms_norm, norm_before_gate=cfg.mamba_norm_before_gate, norm_eps=cfg.norm_eps,
            zxbcdt_multipliers=cfg.ssm_multipliers,
        )
        self.self_attn = FalconH1Attention(cfg)
        self.input_layernorm = RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.pre_ff_layernorm = RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.ssm_in, self.ssm_out = cfg.ssm_in_multiplier, cfg.ssm_out_multiplier
        self.attn_in, self.attn_out = cfg.attention_in_multiplier, cfg.attention_out_multiplier

    @staticmethod
    def _scale(x: torch.Tensor, m: float) -> torch.Tensor:
        return x if m == 1.0 else x * m

    def _mix(self, x: torch.Tensor, mamba: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        h = x + (self._scale(mamba, self.ssm_out) + self._scale(attn, self.attn_out))
        return h + self.feed_forward(self.pre_ff_layernorm(h))

    def forward(self, x: torch.Tensor, rope: Rope, cache: FalconH1Cache | None, i: int) -> torch.Tensor:
        h = self.input_layernorm(x)
        mamba = self.mamba(self._scale(h, self.ssm_in), None if cache is None else cache.mamba, i)
        attn = self.self_attn(self._scale(h, self.attn_in), rope, None if cache is None else cache.kv, i)
        return self._mix(x, mamba, attn)

    def step(self, x: torch.Tensor, rope: Rope, cache: FalconH1Cache, i: int, pos: int) -> torch.Tensor:
        h = self.input_layernorm(x)
        mamba = self.mamba.step(self._scale(h, self.ssm_in), cache.mamba, i)
        attn = self.self_attn.step(self._scale(h, self.attn_in), rope, cache.kv, i, pos)
        return self._mix(x, mamba, attn)


class FalconH1Cache:
    """Everything one request's slow AR carries between steps: SSM/conv states, K/V, length."""

    def __init__(self, cfg: FalconH1Config, max_length: int, *, batch_size: int = 1,
                 dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> None:
        conv_dim = cfg.mamba_d_ssm + 2 * cfg.mamba_n_groups * cfg.mamba_d_state
        self.mamba = Mamba2Cache(cfg.n_layer, batch_size, conv_dim, cfg.mamba_d_conv, cfg.mamba_n_heads,
                                 cfg.mamba_d_head, cfg.mamba_d_state, device=device)
        self.kv = StaticKVCache(cfg.n_layer, cfg.n_local_heads, cfg.head_dim, max_length,
                                batch_size=batch_size, dtype=dtype, device=device)
        self.length = 0

    @property
    def max_length(self) -> int:
        return self.kv.max_length

    def reset(self) -> None:
        self.mamba.reset()
        self.kv.reset()
        self.length = 0


class FalconH1Backbone(nn.Module):
    """``FalconH1Model`` entered at ``inputs_embeds``: layers, ``final_layernorm``, RoPE table."""

    def __init__(self, cfg: FalconH1Config) -> None:
        super().__init__()
        self.config = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList(FalconH1Layer(cfg) for _ in range(cfg.n_layer))
        self.final_layernorm = RMSNorm(cfg.dim, eps=cfg.norm_eps)
        freqs = torch.outer(torch.arange(cfg.max_seq_len, dtype=torch.float32), rope_inv_freq(cfg.head_dim, cfg.rope_base))
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("rope_cos", emb.cos(), persistent=False)
        self.register_buffer("rope_sin", emb.sin(), persistent=False)

    def keep_fp32(self) -> None:
        """After a cast to a reduced compute dtype: SSM parameters and the conv back to float32."""
        for layer in self.layers:
            layer.mamba.keep_fp32()
        self.rope_cos.data = self.rope_cos.float()
        self.rope_sin.data = self.rope_sin.float()

    def new_cache(self, max_length: int, *, batch_size: int = 1) -> FalconH1Cache:
        if max_length > self.config.max_seq_len:
            raise ValueError(f"cache of {max_length} positions is past max_seq_len {self.config.max_seq_len}")
        w = self.final_layernorm.weight
        return FalconH1Cache(self.config, max_length, batch_size=batch_size, dtype=w.dtype, device=w.device)

    def _rope(self, start: int, length: int, dtype: torch.dtype) -> Rope:
        return self.rope_cos[start : start + length].to(dtype), self.rope_sin[start : start + length].to(dtype)

    def _scaled(self, embeds: torch.Tensor) -> torch.Tensor:
        m = self.config.embedding_multiplier
        return embeds if m == 1.0 else embeds * m

    def prefill(self, embeds: torch.Tensor, cache: FalconH1Cache | None = None) -> torch.Tensor:
        """The prompt (B, T, dim), unscaled embedding sums, from position 0 -> last_hidden_state."""
        t = embeds.shape[1]
        if cache is not None:
            if t > cache.max_length:
                raise RuntimeError(f"prompt of {t} positions is past the cache capacity {cache.max_length}")
            cache.reset()
        h = self._scaled(embeds)
        rope = self._rope(0, t, h.dtype)
        for i, layer in enumerate(self.layers):
            h = layer(h, rope, cache, i)
        if cache is not None:
            cache.length = t
        return self.final_layernorm(h)

    def step(self, embeds: torch.Tensor, cache: FalconH1Cache) -> torch.Tensor:
        """One new position (B, 1, dim) at ``cache.length`` -> its last_hidden_state."""
        pos = cache.length
        if pos >= cache.max_length:
            raise RuntimeError(f"slow AR cache is full ({cache.max_length} positions)")
        h = self._scaled(embeds)
        rope = self._rope(pos, 1, h.dtype)
        for i, layer in enumerate(self.layers):
            h = layer.step(h, rope, cache, i, pos)
        cache.length = pos + 1
        return self.final_layernorm(h)


class FalconH1SlowAR(nn.Module):
    """Backbone (``slow``) plus the compact semantic head (``semantic_output``, codebook_size + 1 rows)."""

    def __init__(self, cfg: FalconH1Config) -> None:
        super().__init__()
        self.config = cfg
        self.slow = FalconH1Backbone(cfg)
        self.semantic_output = nn.Linear(cfg.dim, cfg.codebook_size + 1, bias=False)

    @property
    def text_embeddings(self) -> nn.Embedding:
        return self.slow.embed_tokens

    def prefill(self, embeds: torch.Tensor, cache: FalconH1Cache | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(compact logits, last_hidden_state) for every prompt position."""
        hidden = self.slow.prefill(embeds, cache)
        return self.semantic_output(hidden), hidden

    def step(self, embeds: torch.Tensor, cache: FalconH1Cache) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.slow.step(embeds, cache)
        return self.semantic_output(hidden), hidden
