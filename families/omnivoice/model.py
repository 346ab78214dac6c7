"""The OmniVoice language model: a Qwen3 backbone with the hybrid text/audio input embedding
and the audio heads. Module names follow upstream (``llm.layers.N.self_attn.q_proj`` ...),
so the k2-fsa/OmniVoice state dict loads 1:1.

Attention is bidirectional under a boolean mask, exactly as upstream runs it with the
default SDPA backend (padded positions of the unconditional row are masked off).
"""

from __future__ import annotations

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

    def forward(self, x: torch.Tensor, rope: Rope, mask: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        shape = (b, s, -1, self.head_dim)
        q = self.q_norm(self.q_proj(x).view(shape)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(shape)).transpose(1, 2)
        v = self.v_proj(x).view(shape).transpose(1, 2)
        cos, sin = rope[0].unsqueeze(1), rope[1].unsqueeze(1)
        q = (q * cos) + (rotate_half(q) * sin)
        k = (k * cos) + (rotate_half(k) * sin)
        return self.o_proj(sdpa(q, k, v, mask, scale=self.scale))


class Qwen3DecoderLayer(nn.Module):
    def __init__(self, cfg: LMConfig) -> None:
        super().__init__()
        self.self_attn = Qwen3Attention(cfg)
        self.mlp = SwiGLU(cfg.hidden_size, cfg.intermediate_size)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x: torch.Tensor, rope: Rope, mask: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), rope, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Qwen3Model(nn.Module):
    """``transformers.Qwen3Model`` without the KV cache (MaskGIT re-runs the whole sequence)."""

    def __init__(self, cfg: LMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(Qwen3DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x: torch.Tensor, rope: Rope, mask: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, rope, mask)
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

    def hidden(self, input_ids: torch.Tensor, audio_mask: torch.Tensor, mask: torch.Tensor, rope: Rope,
               dtype: torch.dtype | None = None) -> torch.Tensor:
        x = self.embed(input_ids, audio_mask)
        if dtype is not None:
            x = x.to(dtype)
        return self.llm(x, rope, mask)

    def heads(self, hidden: torch.Tensor) -> torch.Tensor:
        """(B, S, H) -> float32 logits (B, C, S, V)."""
        b, s, _ = hidden.shape
        logits = self.audio_heads(hidden).view(b, s, self.cfg.num_audio_codebook, self.cfg.audio_vocab_size)
        return logits.permute(0, 2, 1, 3).to(torch.float32)

    def forward(self, input_ids: torch.Tensor, audio_mask: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Upstream's ``OmniVoice.forward(...).logits`` for every position (parity tests)."""
        b, _, s = input_ids.shape
        positions = torch.arange(s).unsqueeze(0).expand(b, -1)
        rope = rope_tables(positions, self.cfg.llm, self.audio_heads.weight.dtype)
        return self.heads(self.hidden(input_ids, audio_mask, attention_mask, rope))
