"""The OmniVoice language model: a Qwen3 backbone with the hybrid text/audio input embedding
and the audio heads. Module names follow upstream (``llm.layers.N.self_attn.q_proj`` ...),
so the k2-fsa/OmniVoice state dict loads 1:1.

Attention is bidirectional under a boolean mask, exactly as upstream runs it with the
default SDPA backend (padded positions of the unconditional row are masked off).

Rows are *packed*: the backbone sees the valid positions of every row one after the other
(a (N, hidden) matrix), and only attention treats rows separately (``Packing.attend``).
Every projection and norm works row by row (matrix products with more than one row give
each row the same bits whatever the other rows), and padded positions never reach a valid
one through the mask, so packing skips the padding of the unconditional row without
changing any float32 result.
"""

from __future__ import annotations

import torch
from torch import nn

from audiocpp.engine.nn.layers.attention import sdpa
from audiocpp.engine.nn.layers.decoder import HF_NAMES, DecoderConfig, DecoderLayer
from audiocpp.engine.nn.layers.norm import RMSNorm
from audiocpp.engine.nn.layers.rope import rope_inv_freq, rotate_half

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


class Packing:
    """Row ``b`` of a padded (B, S) batch keeps its first ``lengths[b]`` positions; :meth:`merge`
    joins the packings of several items (each its own S) into one, for a batch of requests.

    ``attend`` runs attention row by row. Exact mode (float32) calls SDPA as upstream does:
    a row that attends everywhere without a mask (the same bits as an all-True mask), a
    packed row padded back to S under its mask (precomputed as an additive float mask, which
    torch builds from a bool mask anyway). Fast mode (bf16/fp16) attends each row's valid
    block with grouped matrix products and a float32 softmax, skipping padding and masks.
    """

    def __init__(self, lengths: tuple[int, ...], seq_len: int, mask: torch.Tensor,
                 exact: bool = True) -> None:
        self.lengths, self.exact = tuple(lengths), exact
        self.seq_lens = (seq_len,) * len(self.lengths)
        self.row_masks: list[torch.Tensor | None] = []
        self.block_open: list[bool] = []
        for b, n in enumerate(self.lengths):
            row = mask[b, 0]
            self.block_open.append(bool(row[:n, :n].all()))
            if n == seq_len and self.block_open[-1]:
                self.row_masks.append(None)
            else:
                self.row_masks.append(torch.zeros(1, 1, seq_len, seq_len).masked_fill(~row, float("-inf")))
        self._starts()

    def _starts(self) -> None:
        self.starts = [sum(self.lengths[:b]) for b in range(len(self.lengths))]

    @classmethod
    def merge(cls, packings: list[Packing]) -> Packing:
        """The rows of several packings (items of a batch, each padded to its own length) as one."""
        out = cls.__new__(cls)
        out.exact = packings[0].exact
        out.lengths = tuple(n for p in packings for n in p.lengths)
        out.seq_lens = tuple(s for p in packings for s in p.seq_lens)
        out.row_masks = [m for p in packings for m in p.row_masks]
        out.block_open = [o for p in packings for o in p.block_open]
        out._starts()
        return out

    @property
    def seq_len(self) -> int:
        return max(self.seq_lens)

    @property
    def full(self) -> bool:
        return all(n == s for n, s in zip(self.lengths, self.seq_lens))

    def pack(self, x: torch.Tensor, dim: int = 0) -> torch.Tensor:
        """(B, ...) with S at ``dim + 1`` -> the rows' valid positions concatenated along ``dim``."""
        if len(self.lengths) == 1 and self.full:
            return x[0]
        return torch.cat([x[b].narrow(dim, 0, n) for b, n in enumerate(self.lengths)], dim=dim)

    def positions(self) -> torch.Tensor:
        """(1, N): each row's positions 0..n-1, as upstream's default ``position_ids``."""
        return torch.cat([torch.arange(n) for n in self.lengths]).unsqueeze(0)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
        """Packed (N, heads, D) q/k/v -> packed (N, heads * D) attention output."""
        outs = []
        for b, (start, n) in enumerate(zip(self.starts, self.lengths)):
            qi, ki, vi = (t[start:start + n] for t in (q, k, v))
            if not self.exact and self.block_open[b]:
                outs.append(grouped_attention(qi, ki, vi, scale))
                continue
            row_mask = self.row_masks[b]
            if row_mask is None:
                # upstream's layout: (1, S, heads, D) viewed as (1, heads, S, D)
                outs.append(sdpa(*(t.unsqueeze(0).transpose(1, 2) for t in (qi, ki, vi)), None,
                                 scale=scale)[0])
                continue
            padded = []
            for t in (qi, ki, vi):
                buf = t.new_zeros((1, self.seq_lens[b], *t.shape[1:]))
                buf[0, :n] = t
                padded.append(buf.transpose(1, 2))
            outs.append(sdpa(*padded, row_mask.to(device=q.device, dtype=q.dtype), scale=scale)[0, :n])
        return outs[0] if len(outs) == 1 else torch.cat(outs)


def grouped_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Unmasked attention of one row, (n, Hq, D) / (n, Hkv, D) -> (n, Hq * D): each KV head
    serves its group of query heads through one matrix product; softmax in float32."""
    n, hq, d = q.shape
    hk = k.shape[1]
    qg = q.transpose(0, 1).reshape(hk, (hq // hk) * n, d)
    scores = torch.bmm(qg, k.transpose(0, 1).transpose(1, 2))
    probs = (scores.to(torch.float32) * scale).softmax(dim=-1).to(q.dtype)
    out = torch.bmm(probs, v.transpose(0, 1))
    return out.view(hq, n, d).transpose(0, 1).reshape(n, hq * d)


def decoder_config(cfg: LMConfig) -> DecoderConfig:
    """The Qwen3 block as ``engine.nn.layers.decoder`` describes it (HF names, qk-norm, GQA)."""
    return DecoderConfig(dim=cfg.hidden_size, n_head=cfg.num_attention_heads,
                         n_kv_head=cfg.num_key_value_heads, head_dim=cfg.head_dim,
                         intermediate_size=cfg.intermediate_size, norm_eps=cfg.rms_norm_eps,
                         qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias, qk_norm=True,
                         rope_base=cfg.rope_theta, names=HF_NAMES)


class Qwen3Model(nn.Module):
    """``transformers.Qwen3Model`` without the KV cache (MaskGIT re-runs the whole sequence).

    The blocks are ``engine.nn.layers.decoder.DecoderLayer`` (weights, q/k/v projections with qk-norm,
    the SiLU MLP; upstream's names ``layers.N.self_attn.q_proj`` ...). The attention is this
    family's: bidirectional over packed rows (:class:`Packing`), which the engine's causal
    :class:`~audiocpp.engine.nn.layers.decoder.DecoderStack` does not do.
    """

    def __init__(self, cfg: LMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.scale = cfg.head_dim ** -0.5
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        block = decoder_config(cfg)
        self.layers = nn.ModuleList(DecoderLayer(block) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x: torch.Tensor, rope: Rope, packing: Packing) -> torch.Tensor:
        """Packed rows (N, hidden) and cos/sin (N, head_dim) -> final hidden states (N, hidden)."""
        cos, sin = rope[0].unsqueeze(1), rope[1].unsqueeze(1)
        for layer in self.layers:
            attn = layer.attn
            q, k, v = (t[0] for t in attn.project(layer.attention_input(x).unsqueeze(0)))  # (N, heads, D)
            q = (q * cos) + (rotate_half(q) * sin)
            k = (k * cos) + (rotate_half(k) * sin)
            x = layer.mlp_block(x + attn.output(packing.attend(q, k, v, self.scale)))
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
        # Derived from the config, not stored: made on the CPU even when the module is built
        # on the meta device for loading (engine.nn.build.load_on_meta).
        self.register_buffer("codebook_layer_offsets", torch.arange(c, device="cpu") * v, persistent=False)

    def embed(self, input_ids: torch.Tensor, audio_mask: torch.Tensor) -> torch.Tensor:
        """(B, C, S) ids and (B, S) audio mask -> (B, S, H): text rows from ``embed_tokens``
        (looked up at every position, as upstream does), audio rows summed over codebooks."""
        text = self.llm.embed_tokens(input_ids[:, 0, :])
        shifted = input_ids * audio_mask.unsqueeze(1) + self.codebook_layer_offsets.view(1, -1, 1)
        # 16-bit tables (packages) are summed in float32, as float32 tables holding their values
        audio = self.audio_embeddings(shifted).to(torch.float32).sum(dim=1)
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

    def forward(self, input_ids: torch.Tensor, audio_mask: torch.Tensor,
                attention_mask: torch.Tensor) -> torch.Tensor:
        """Upstream's ``OmniVoice.forward(...).logits`` (B, C, S, V) for every position of a
        padded batch (parity tests); every row is kept whole."""
        b, _, s = input_ids.shape
        packing = Packing((s,) * b, s, attention_mask, exact=self.audio_heads.weight.dtype == torch.float32)
        ids = packing.pack(input_ids, dim=1).unsqueeze(0)
        mask = packing.pack(audio_mask).unsqueeze(0)
        rope = rope_tables(packing.positions(), self.cfg.llm, self.audio_heads.weight.dtype)
        hidden = self.hidden(ids, mask, packing, (rope[0][0], rope[1][0]))
        return self.heads(hidden.view(b, s, -1))
