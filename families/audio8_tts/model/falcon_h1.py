"""The Audio8 TTS 0.1B slow AR: a Falcon-H1 hybrid backbone and the compact semantic head.

Every layer runs a Mamba2 mixer and GQA attention side by side on the same normed input, adds
both to the residual, then the SwiGLU MLP (transformers' ``FalconH1DecoderLayer``). Attention
uses rotate-half RoPE (base 1e11 in the real checkpoint). Module names follow the checkpoint
(``slow.embed_tokens``, ``slow.layers.N.{mamba, self_attn, feed_forward, input_layernorm,
pre_ff_layernorm}``, ``slow.final_layernorm``, ``semantic_output``), so state dicts map 1:1.

The 0.1B wrapper feeds ``FalconH1Model`` an embedding it builds itself: the text embedding plus
the masked codebook sum, times ``embedding_multiplier`` applied to the whole sum
(``docs/families/audio8_tts-0.1b.md``). ``last_hidden_state`` (after
``final_layernorm``) feeds both ``semantic_output`` (4097 compact logits: index i is semantic
token ``semantic_begin_id + i``, index 4096 is EOS) and the fast AR. Every muP multiplier of the
config is honoured; ``lm_head_multiplier`` is not used by the wrapper (it has its own head).

Caches are static: a :class:`~audiocpp.engine.nn.layers.mamba2.Mamba2Cache` for the conv and SSM
states (float32) and a :class:`~audiocpp.engine.nn.layers.kv_cache.StaticKVCache` for attention, both
allocated once per generation by :meth:`FalconH1SlowAR.setup`. A prompt runs through the
chunked SSD scan and causal attention; every later token through the recurrent state update and
attention over the filled prefix of the KV buffer.

Left-padded batches follow ``FalconH1Model`` given ``attention_mask``: with more than one row the
Mamba2 input and its conv output are zeroed at padded positions during the prompt (not in the
one-token steps), and a query attends to the causal keys whose padding bit equals its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from audiocpp.engine.errors import ModelError
from audiocpp.engine.nn.layers.attention import sdpa
from audiocpp.engine.nn.layers.kv_cache import StaticKVCache
from audiocpp.engine.nn.layers.mamba2 import Mamba2Cache, Mamba2Mixer
from audiocpp.engine.nn.layers.mlp import SwiGLU
from audiocpp.engine.nn.layers.norm import RMSNorm
from audiocpp.engine.nn.layers.rope import apply_rotary, rope_inv_freq

from .slow_ar import SlowAR, SlowHidden

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
        try:
            return cls._from_dict(cfg)
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"config.json: bad Falcon-H1 slow-AR settings ({exc})",
                             hint="the config.json does not describe an Audio8 TTS 0.1B model") from None

    @classmethod
    def _from_dict(cls, cfg: Mapping[str, Any]) -> FalconH1Config:
        if cfg.get("hidden_act", "silu") != "silu":
            raise ValueError(f"hidden_act must be 'silu', not {cfg['hidden_act']!r}")
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
        if config.mamba_n_heads * config.mamba_d_head != config.mamba_d_ssm:
            raise ValueError(f"mamba_n_heads x mamba_d_head != mamba_d_ssm {config.mamba_d_ssm}")
        if config.mamba_n_heads % config.mamba_n_groups or config.n_head % config.n_local_heads:
            raise ValueError("heads must be a multiple of groups / KV heads")
        return config


class FalconH1Cache:
    """One generation's slow-AR state: SSM/conv states, K/V, key padding bits, write position."""

    def __init__(self, cfg: FalconH1Config, max_length: int, *, batch_size: int = 1,
                 dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> None:
        conv_dim = cfg.mamba_d_ssm + 2 * cfg.mamba_n_groups * cfg.mamba_d_state
        self.mamba = Mamba2Cache(cfg.n_layer, batch_size, conv_dim, cfg.mamba_d_conv, cfg.mamba_n_heads,
                                 cfg.mamba_d_head, cfg.mamba_d_state, device=device)
        self.kv = StaticKVCache(cfg.n_layer, cfg.n_local_heads, cfg.head_dim, max_length,
                                batch_size=batch_size, dtype=dtype, device=device)
        self.key_mask = torch.ones(batch_size, max_length, dtype=torch.bool, device=device)
        self.batch_size = batch_size
        self.length = 0
        #: Whether attention needs the padding mask (a batch, or a padded prompt).
        self.masked = batch_size > 1

    @property
    def max_length(self) -> int:
        return self.kv.max_length

    def reset(self) -> None:
        self.mamba.reset()
        self.kv.reset()
        self.key_mask.fill_(True)
        self.length = 0
        self.masked = self.batch_size > 1


class FalconH1Attention(nn.Module):
    def __init__(self, cfg: FalconH1Config) -> None:
        super().__init__()
        self.head_dim = cfg.head_dim
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

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                causal: bool) -> torch.Tensor:
        return self.o_proj(self._context(q, k, v, mask, causal))

    def _context(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                 causal: bool) -> torch.Tensor:
        """Attention output before ``o_proj``, ``(B, T, heads * head_dim)``."""
        if mask is None:  # transformers' sdpa path without a mask: is_causal, grouped heads
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=self.scale, enable_gqa=True)
            return out.transpose(1, 2).reshape(q.shape[0], q.shape[2], -1)
        return sdpa(q, k, v, mask, scale=self.scale)  # with a mask: K/V heads repeated

    def forward(self, x: torch.Tensor, rope: Rope, cache: FalconH1Cache | None, layer: int,
                mask: torch.Tensor | None) -> torch.Tensor:
        """The prompt (positions from slot 0); ``mask`` (B, 1, T, T) bool or None (plain causal)."""
        q, k, v = self._qkv(x, rope)
        if cache is not None:
            cache.kv.write(layer, 0, k, v)
        return self._attend(q, k, v, mask, causal=q.shape[2] > 1)

    def step(self, x: torch.Tensor, rope: Rope, cache: FalconH1Cache, layer: int, pos: int,
             mask: torch.Tensor | None) -> torch.Tensor:
        """One new column at slot ``pos`` against the filled prefix ``0..pos``."""
        q, k, v = self._qkv(x, rope)
        return self.o_proj(self._cached_context(q, k, v, cache, layer, pos, mask))

    def step_rows(self, x: torch.Tensor, rope: Rope, caches: list[FalconH1Cache], layer: int,
                  slots: list[int], masks: list[torch.Tensor | None]) -> torch.Tensor:
        """One column per row (``x`` (B, 1, dim)), row ``b`` at ``slots[b]`` of ``caches[b]``:
        projections over all rows, attention row by row."""
        q, k, v = self._qkv(x, rope)
        context = torch.cat([self._cached_context(q[b:b + 1], k[b:b + 1], v[b:b + 1], cache, layer, slot,
                                                  mask)
                             for b, (cache, slot, mask) in enumerate(zip(caches, slots, masks))])
        return self.o_proj(context)

    def _cached_context(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: FalconH1Cache,
                        layer: int, pos: int, mask: torch.Tensor | None) -> torch.Tensor:
        cache.kv.write(layer, pos, k, v)
        keys, values = cache.kv.layer(layer)
        return self._context(q, keys[:, :, : pos + 1], values[:, :, : pos + 1], mask, causal=False)


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


def _scale(x: torch.Tensor, m: float) -> torch.Tensor:
    return x if m == 1.0 else x * m


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

    def _mix(self, x: torch.Tensor, mamba: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        h = x + (_scale(mamba, self.ssm_out) + _scale(attn, self.attn_out))
        return h + self.feed_forward(self.pre_ff_layernorm(h))

    def forward(self, x: torch.Tensor, rope: Rope, cache: FalconH1Cache | None, i: int,
                attn_mask: torch.Tensor | None, pad_mask: torch.Tensor | None) -> torch.Tensor:
        h = self.input_layernorm(x)
        mamba = self.mamba(_scale(h, self.ssm_in), None if cache is None else cache.mamba, i,
                           pad_mask=pad_mask)
        attn = self.self_attn(_scale(h, self.attn_in), rope, cache, i, attn_mask)
        return self._mix(x, mamba, attn)

    def step(self, x: torch.Tensor, rope: Rope, cache: FalconH1Cache, i: int, pos: int,
             attn_mask: torch.Tensor | None) -> torch.Tensor:
        h = self.input_layernorm(x)
        mamba = self.mamba.step(_scale(h, self.ssm_in), cache.mamba, i)
        attn = self.self_attn.step(_scale(h, self.attn_in), rope, cache, i, pos, attn_mask)
        return self._mix(x, mamba, attn)

    def step_rows(self, x: torch.Tensor, rope: Rope, caches: list[FalconH1Cache], i: int, slots: list[int],
                  masks: list[torch.Tensor | None]) -> torch.Tensor:
        h = self.input_layernorm(x)
        mamba = self.mamba.step_rows(_scale(h, self.ssm_in), [c.mamba for c in caches], i)
        attn = self.self_attn.step_rows(_scale(h, self.attn_in), rope, caches, i, slots, masks)
        return self._mix(x, mamba, attn)


class FalconH1Backbone(nn.Module):
    """``FalconH1Model`` entered at ``inputs_embeds`` (already scaled): layers, ``final_layernorm``."""

    def __init__(self, cfg: FalconH1Config) -> None:
        super().__init__()
        self.config = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList(FalconH1Layer(cfg) for _ in range(cfg.n_layer))
        self.final_layernorm = RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self._rope_tables: dict[torch.device, Rope] = {}

    def keep_fp32(self) -> None:
        """After a cast to a reduced compute dtype: the SSM parameters and the conv back to float32."""
        for layer in self.layers:
            layer.mamba.keep_fp32()

    def rope_table(self, device: torch.device) -> Rope:
        """float32 cos/sin of every position (transformers' default rotary: ``cat(f, f)``), made
        on first use per device (the module may be built on ``meta``)."""
        if device not in self._rope_tables:
            cfg = self.config
            positions = torch.arange(cfg.max_seq_len, dtype=torch.float32, device=device)
            freqs = torch.outer(positions, rope_inv_freq(cfg.head_dim, cfg.rope_base).to(device))
            emb = torch.cat((freqs, freqs), dim=-1)
            self._rope_tables[device] = (emb.cos(), emb.sin())
        return self._rope_tables[device]

    def new_cache(self, max_length: int, *, batch_size: int = 1) -> FalconH1Cache:
        if max_length > self.config.max_seq_len:
            raise ModelError(f"a generation of {max_length} positions is past "
                             f"max_seq_len {self.config.max_seq_len}",
                             hint="use a shorter text or reference, or fewer max_new_tokens")
        w = self.final_layernorm.weight
        return FalconH1Cache(self.config, max_length, batch_size=batch_size, dtype=w.dtype, device=w.device)

    def _rope(self, h: torch.Tensor, positions: torch.Tensor | None, start: int, length: int) -> Rope:
        cos, sin = self.rope_table(h.device)
        if positions is None:
            return cos[start : start + length].to(h.dtype), sin[start : start + length].to(h.dtype)
        return cos[positions][:, None].to(h.dtype), sin[positions][:, None].to(h.dtype)

    def prefill(self, h: torch.Tensor, cache: FalconH1Cache | None = None,
                positions: torch.Tensor | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The prompt ``h`` (B, T, dim) at slots 0..T-1 -> last_hidden_state (B, T, dim).

        ``positions`` (B, T) are rotary positions (default ``0..T-1``); ``mask`` (B, T) the key
        padding bits (default all real).
        """
        b, t, _ = h.shape
        if cache is not None:
            if t > cache.max_length:
                raise ModelError(f"a prompt of {t} positions is past the slow-AR cache ({cache.max_length})")
            cache.reset()
        keys = None if mask is None else mask.to(torch.bool)
        # One host sync per prompt: a single unpadded row takes the plain causal kernel.
        masked = keys is not None and (b > 1 or not bool(keys.all()))
        attn_mask = pad_mask = None
        if masked:
            assert keys is not None
            causal = torch.ones(t, t, dtype=torch.bool, device=h.device).tril()
            attn_mask = (causal[None] & (keys[:, None, :] == keys[:, :, None]))[:, None]
            pad_mask = keys if b > 1 else None  # transformers masks the Mamba2 input of batches only
        if cache is not None:
            cache.masked = cache.masked or masked
            if keys is not None:
                cache.key_mask[:, :t] = keys
        rope = self._rope(h, positions, 0, t)
        for i, layer in enumerate(self.layers):
            h = layer(h, rope, cache, i, attn_mask, pad_mask)
        if cache is not None:
            cache.length = t
        return self.final_layernorm(h)

    def step(self, h: torch.Tensor, cache: FalconH1Cache, positions: torch.Tensor | None = None,
             valid: torch.Tensor | None = None) -> torch.Tensor:
        """One column ``h`` (B, 1, dim) at slot ``cache.length`` -> its last_hidden_state.

        ``positions`` (B, 1): rotary position (default the slot); ``valid`` (B, 1): its padding bit.
        """
        pos, attn_mask = self._next_slot(cache, valid)
        rope = self._rope(h, positions, pos, 1)
        for i, layer in enumerate(self.layers):
            h = layer.step(h, rope, cache, i, pos, attn_mask)
        cache.length = pos + 1
        return self.final_layernorm(h)

    def step_rows(self, h: torch.Tensor, caches: list[FalconH1Cache],
                  positions: torch.Tensor) -> torch.Tensor:
        """One column per row (``h`` (B, 1, dim)), row ``b`` at the next slot of its one-row
        ``caches[b]``; ``positions`` (B, 1) the rotary positions."""
        if len(caches) == 1:
            return self.step(h, caches[0], positions)
        slots, masks = zip(*(self._next_slot(cache, None) for cache in caches))
        rope = self._rope(h, positions, 0, 1)
        for i, layer in enumerate(self.layers):
            h = layer.step_rows(h, rope, caches, i, list(slots), list(masks))
        for cache, slot in zip(caches, slots):
            cache.length = slot + 1
        return self.final_layernorm(h)

    @staticmethod
    def _next_slot(cache: FalconH1Cache, valid: torch.Tensor | None) -> tuple[int, torch.Tensor | None]:
        """The slot a step writes, and its attention mask (None without padding)."""
        pos = cache.length
        if pos >= cache.max_length:
            raise ModelError(f"the slow-AR cache is full ({cache.max_length} positions)",
                             hint="lower max_new_tokens")
        attn_mask = None
        if cache.masked:
            bit = torch.ones_like(cache.key_mask[:, :1]) if valid is None else valid.to(torch.bool)
            cache.key_mask[:, pos : pos + 1] = bit
            attn_mask = (cache.key_mask[:, : pos + 1] == bit)[:, None, None, :]
        return pos, attn_mask


class FalconH1SlowAR(SlowAR):
    """The 0.1B slow AR behind :class:`~.slow_ar.SlowAR`: ``codebook_embeddings``, ``slow`` (the
    Falcon-H1 backbone) and ``semantic_output`` (``num_semantic + 1`` compact scores)."""

    head = "compact"

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = config
        self.falcon = FalconH1Config.from_dict(config.raw or {
            k: getattr(config, k) for k in ("vocab_size", "dim", "n_layer", "n_head", "n_local_heads",
                                            "head_dim", "intermediate_size", "max_seq_len", "rope_base",
                                            "norm_eps")})
        self.dim = config.dim
        self.codebook_embeddings = nn.Embedding(config.codebook_size * config.num_codebooks, config.dim)
        self.slow = FalconH1Backbone(self.falcon)
        self.semantic_output = nn.Linear(config.dim, config.num_semantic + 1, bias=False)
        self.cache: FalconH1Cache | None = None

    def _apply(self, fn, recurse: bool = True):  # noqa: ANN001 - torch's signature
        # Any dtype cast (.to / .bfloat16 / .half) leaves the Mamba2 SSM parameters in float32.
        out = super()._apply(fn, recurse)
        self.slow.keep_fp32()
        return out

    def setup(self, batch_size: int, max_length: int) -> None:
        self.cache = self.slow.new_cache(max_length, batch_size=batch_size)

    def new_state(self, max_length: int) -> FalconH1Cache:
        return self.slow.new_cache(max_length)

    def release(self) -> None:
        self.cache = None

    def embed(self, rows: torch.Tensor) -> torch.Tensor:
        """(text embedding + codebook sum where row 0 is semantic) x ``embedding_multiplier``."""
        cfg = self.config
        offsets = torch.arange(0, cfg.num_codebooks * cfg.codebook_size, cfg.codebook_size,
                               device=rows.device)
        codebook_sum = self.codebook_embeddings(rows[:, 1:] + offsets[:, None]).sum(dim=1)
        semantic = (rows[:, 0] >= cfg.semantic_begin_id) & (rows[:, 0] <= cfg.semantic_end_id)
        codebook_sum = torch.where(semantic.unsqueeze(-1), codebook_sum, 0.0)
        return _scale(self.slow.embed_tokens(rows[:, 0]) + codebook_sum, self.falcon.embedding_multiplier)

    def _need_cache(self) -> FalconH1Cache:
        if self.cache is None:
            raise RuntimeError("FalconH1SlowAR.setup() must run before prefill/step")
        return self.cache

    def prefill(self, embeds: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor,
                state: FalconH1Cache | None = None) -> SlowHidden:
        """The last position's ``last_hidden_state`` ``[B, 1, dim]``, for the head and the fast AR."""
        hidden = self.slow.prefill(embeds, state or self._need_cache(), positions, mask)[:, -1:]
        return SlowHidden(hidden, hidden)

    def step(self, embeds: torch.Tensor, positions: torch.Tensor, valid: torch.Tensor,
             state: FalconH1Cache | None = None) -> SlowHidden:
        hidden = self.slow.step(embeds, state or self._need_cache(), positions, valid)
        return SlowHidden(hidden, hidden)

    def step_rows(self, embeds: torch.Tensor, positions: torch.Tensor,
                  states: list[FalconH1Cache]) -> SlowHidden:
        hidden = self.slow.step_rows(embeds, states, positions)
        return SlowHidden(hidden, hidden)

    def semantic_logits(self, hidden: torch.Tensor, *, compact: bool = False) -> torch.Tensor:
        """``[B, num_semantic + 1]`` compact scores of the last position (the head is compact
        whatever ``compact`` says)."""
        return self.semantic_output(hidden[:, -1] if hidden.dim() == 3 else hidden)
