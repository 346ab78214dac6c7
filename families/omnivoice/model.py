"""The OmniVoice language model: a Qwen3 backbone with the hybrid text/audio input embedding
and the audio heads. Module names follow upstream (``llm.layers.N.self_attn.q_proj`` ...),
so the k2-fsa/OmniVoice state dict loads 1:1.

Attention is bidirectional under a boolean mask, exactly as upstream runs it with the
default SDPA backend (padded positions of the unconditional row are masked off).

Rows are *packed*: the backbone sees the valid positions of every row one after the other
(a (N, hidden) matrix), and only attention scatters them back into upstream's padded
(B, heads, S, head_dim) batch. Every projection and norm works row by row (matrix products
with more than one row give each row the same bits whatever the other rows), and padded
positions never reach a valid one through the mask, so packing skips the padding of the
unconditional row without changing any result.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from audiocpp.engine.nn.attention import sdpa
from audiocpp.engine.nn.mlp import SwiGLU
from audiocpp.engine.nn.norm import RMSNorm
from audiocpp.engine.nn.rope import rope_inv_freq, rotate_half

from .config import LMConfig, OmniVoiceConfig

Rope = tuple[torch.Tensor, torch.Tensor]


def rope_tables(positions: torch.Tensor, cfg: LMConfig, dtype: torch.dtype = torch.float32) -> Rope:
    """cos/sin of shape (B, S, head_dim) for ``positions`` (B, S), computed as transformers'
    Qwen3RotaryEmbedding does (a float32 outer product, duplicated halves)."""
    inv_freq = rope_inv_freq(cfg.head_dim, cfg.rope_theta)
    expanded = inv_freq[None, :, None].expand(positions.shape[0], -1, 1)
    freqs = (expanded @ positions[:, None, :].to(torch.float32)).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


@dataclass(frozen=True)
class Packing:
    """Row ``b`` of a padded (B, S) batch keeps its first ``lengths[b]`` positions."""

    lengths: tuple[int, ...]
    seq_len: int
    mask: torch.Tensor  # (B, 1, S, S) bool, True = attend

    @property
    def total(self) -> int:
        return sum(self.lengths)

    @property
    def full(self) -> bool:
        return all(n == self.seq_len for n in self.lengths)

    def pack(self, x: torch.Tensor, dim: int = 0) -> torch.Tensor:
        """(B, ...) with S at ``dim + 1`` -> the rows' valid positions concatenated along ``dim``."""
        if len(self.lengths) == 1 and self.full:
            return x[0]
        return torch.cat([x[b].narrow(dim, 0, n) for b, n in enumerate(self.lengths)], dim=dim)

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        """(N, ...) -> (B, S, ...), padding with zeros (never attended to)."""
        if self.full:
            return x.view(len(self.lengths), self.seq_len, *x.shape[1:])
        out = x.new_zeros((len(self.lengths), self.seq_len, *x.shape[1:]))
        start = 0
        for b, n in enumerate(self.lengths):
            out[b, :n] = x[start:start + n]
            start += n
        return out

    def positions(self) -> torch.Tensor:
        """(1, N): each row's positions 0..n-1, as upstream's default ``position_ids``."""
        return torch.cat([torch.arange(n) for n in self.lengths]).unsqueeze(0)


class Qwen3Attention(nn.Module):
    def __init__(self, cfg: LMConfig) -> None:
        super().__init__()
        d, h, hk = cfg.head_dim, cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = d
        self.scale = d ** -0.5
        self.q_proj = nn.Linear(cfg.hidden_size, h * d, bias=cfg.attention_bias)
        self.k_proj = nn.Linear(cfg.hidden_size, hk * d, bias=cfg.attention_bias)
        self.v_proj = nn.Linear(cfg.hidden_size, hk * d, bias=cfg.attention_bias)
        self.o_proj = nn.Linear(h * d, cfg.hidden_size, bias=cfg.attention_bias)
        self.q_norm = RMSNorm(d, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(d, cfg.rms_norm_eps)

    def forward(self, x: torch.Tensor, rope: Rope, packing: Packing) -> torch.Tensor:
        """``x`` (N, hidden) packed rows, ``rope`` cos/sin (N, head_dim)."""
        shape = (x.shape[0], -1, self.head_dim)
        q = self.q_norm(self.q_proj(x).view(shape))
        k = self.k_norm(self.k_proj(x).view(shape))
        v = self.v_proj(x).view(shape)
        cos, sin = rope[0].unsqueeze(1), rope[1].unsqueeze(1)
        q = (q * cos) + (rotate_half(q) * sin)
        k = (k * cos) + (rotate_half(k) * sin)
        # upstream's layout: (B, S, heads, D) viewed as (B, heads, S, D)
        q, k, v = (packing.unpack(t).transpose(1, 2) for t in (q, k, v))
        out = sdpa(q, k, v, packing.mask, scale=self.scale)
        return self.o_proj(packing.pack(out))


class Qwen3DecoderLayer(nn.Module):
    def __init__(self, cfg: LMConfig) -> None:
        super().__init__()
        self.self_attn = Qwen3Attention(cfg)
        self.mlp = SwiGLU(cfg.hidden_size, cfg.intermediate_size)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x: torch.Tensor, rope: Rope, packing: Packing) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), rope, packing)
        return x + self.mlp(self.post_attention_layernorm(x))


class Qwen3Model(nn.Module):
    """``transformers.Qwen3Model`` without the KV cache (MaskGIT re-runs the whole sequence)."""

    def __init__(self, cfg: LMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(Qwen3DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x: torch.Tensor, rope: Rope, packing: Packing) -> torch.Tensor:
        """Packed rows (N, hidden) -> final hidden states (N, hidden)."""
        for layer in self.layers:
            x = layer(x, rope, packing)
        return self.norm(x)


class OmniVoiceLM(nn.Module):
    """Backbone + ``audio_embeddings`` (C*V, H) + ``audio_heads`` (H -> C*V)."""

    def __init__(self, cfg: OmniVoiceConfig) -> None:
        super().__init__()
        self.cfg = cfg
        c, v, h = cfg.num_audio_codebook, cfg.audio_vocab_size, cfg.llm.hidden_size
        self.llm = Qwen3Model(cfg.llm)
        self.audio_embeddings = nn.Embedding(c * v, h)
        self.audio_heads = nn.Linear(h, c * v, bias=False)
        self.register_buffer("codebook_layer_offsets", torch.arange(c) * v, persistent=False)

    def embed(self, input_ids: torch.Tensor, audio_mask: torch.Tensor) -> torch.Tensor:
        """(B, C, S) ids and (B, S) audio mask -> (B, S, H): text rows from ``embed_tokens``
        (looked up at every position, as upstream does), audio rows summed over codebooks."""
        text = self.llm.embed_tokens(input_ids[:, 0, :])
        shifted = input_ids * audio_mask.unsqueeze(1) + self.codebook_layer_offsets.view(1, -1, 1)
        audio = self.audio_embeddings(shifted).sum(dim=1)
        return torch.where(audio_mask.unsqueeze(-1), audio, text)

    def hidden(self, input_ids: torch.Tensor, audio_mask: torch.Tensor, packing: Packing, rope: Rope,
               dtype: torch.dtype | None = None) -> torch.Tensor:
        """Packed ids (1, C, N) and audio mask (1, N) -> final hidden states (N, hidden)."""
        x = self.embed(input_ids, audio_mask)[0]
        if dtype is not None:
            x = x.to(dtype)
        return self.llm(x, rope, packing)

    def heads(self, hidden: torch.Tensor) -> torch.Tensor:
        """(..., S, H) -> float32 logits (..., C, S, V)."""
        logits = self.audio_heads(hidden)
        logits = logits.view(*hidden.shape[:-1], self.cfg.num_audio_codebook, self.cfg.audio_vocab_size)
        return logits.transpose(-3, -2).to(torch.float32)

    def forward(self, input_ids: torch.Tensor, audio_mask: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Upstream's ``OmniVoice.forward(...).logits`` (B, C, S, V) for every position of a
        padded batch (parity tests); every row is kept whole."""
        b, _, s = input_ids.shape
        packing = Packing((s,) * b, s, attention_mask)
        ids = packing.pack(input_ids, dim=1).unsqueeze(0)
        mask = packing.pack(audio_mask).unsqueeze(0)
        rope = rope_tables(packing.positions(), self.cfg.llm, self.audio_heads.weight.dtype)
        hidden = self.hidden(ids, mask, packing, (rope[0][0], rope[1][0]))
        return self.heads(hidden.view(b, s, -1))
