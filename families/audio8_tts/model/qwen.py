"""The 0.6B slow AR: a Qwen-style decoder over text and codebook embeddings (upstream
``ArkttsModel``'s ``embeddings``, ``codebook_embeddings``, ``layers``, ``norm``).

Blocks: fused ``wqkv`` with bias, interleaved-pair RoPE whose table is bfloat16, GQA, SwiGLU,
RMSNorm. Logits are tied to ``embeddings.weight`` over the whole vocabulary.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from audiocpp.engine.nn.layers.decoder import (
    FISH_NAMES,
    DecoderCache,
    DecoderConfig,
    DecoderLayer,
    DecoderStack,
)
from audiocpp.engine.nn.layers.norm import RMSNorm

from ..config import Audio8Config
from .slow_ar import SlowAR, SlowHidden

#: Rows of the compact head are padded to a multiple of this, so the GEMM computes every real
#: row in its main loop (as it does for the full vocabulary) rather than in a tail path.
HEAD_ROWS_MULTIPLE = 16


def slow_decoder_config(cfg: Audio8Config) -> DecoderConfig:
    return DecoderConfig(
        dim=cfg.dim, n_head=cfg.n_head, n_kv_head=cfg.n_local_heads, head_dim=cfg.head_dim,
        intermediate_size=cfg.intermediate_size, norm_eps=cfg.norm_eps, qkv_bias=cfg.attention_qkv_bias,
        o_bias=cfg.attention_o_bias, qk_norm=cfg.attention_qk_norm, rope_style="interleaved",
        rope_base=cfg.rope_base, rope_table_dtype=torch.bfloat16, attention="sdpa", names=FISH_NAMES,
    )


def embed_rows(rows: torch.Tensor, embeddings: nn.Embedding, codebook_embeddings: nn.Embedding,
               cfg: Audio8Config) -> torch.Tensor:
    """``embeddings(row0) + sum_i codebook_embeddings(row_{i+1} + i * codebook_size)``, the sum
    zeroed where row 0 is not a semantic id (upstream ``_embed``; no scaling)."""
    codebook_embeds = [codebook_embeddings(rows[:, i + 1] + i * cfg.codebook_size)
                       for i in range(cfg.num_codebooks)]
    codebook_sum = torch.stack(codebook_embeds, dim=1).sum(dim=1)
    semantic = (rows[:, 0] >= cfg.semantic_begin_id) & (rows[:, 0] <= cfg.semantic_end_id)
    codebook_sum = torch.where(semantic.unsqueeze(-1), codebook_sum, 0.0)
    return embeddings(rows[:, 0]) + codebook_sum


class QwenSlowAR(SlowAR):
    head = "full_vocab"

    def __init__(self, cfg: Audio8Config) -> None:
        super().__init__()
        self.cfg = cfg
        self.dim = cfg.dim
        self.embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.codebook_embeddings = nn.Embedding(cfg.codebook_size * cfg.num_codebooks, cfg.dim)
        dcfg = slow_decoder_config(cfg)
        self.layers = nn.ModuleList(DecoderLayer(dcfg) for _ in range(cfg.n_layer))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.stack = DecoderStack(self.layers, dcfg, cfg.max_seq_len)
        self._head: torch.Tensor | None = None

    def setup(self, batch_size: int, max_length: int) -> None:
        self.stack.setup(batch_size, max_length)

    def new_state(self, max_length: int) -> DecoderCache:
        return self.stack.new_cache(1, max_length)

    def release(self) -> None:
        self.stack.release()

    def embed(self, rows: torch.Tensor) -> torch.Tensor:
        return embed_rows(rows, self.embeddings, self.codebook_embeddings, self.cfg)

    def _hidden(self, x: torch.Tensor) -> SlowHidden:
        last = x[:, -1:]
        normed = self.norm(last)
        return SlowHidden(normed, normed if self.cfg.norm_fastlayer_input else last)

    def prefill(self, embeds: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor,
                state: DecoderCache | None = None) -> SlowHidden:
        return self._hidden(self.stack.prefill(embeds, positions, mask, state))

    def step(self, embeds: torch.Tensor, positions: torch.Tensor, valid: torch.Tensor,
             state: DecoderCache | None = None) -> SlowHidden:
        return self._hidden(self.stack.step(embeds, positions, valid, state))

    def step_rows(self, embeds: torch.Tensor, positions: torch.Tensor,
                  states: list[DecoderCache]) -> SlowHidden:
        return self._hidden(self.stack.step_rows(embeds, positions, states))

    def semantic_logits(self, hidden: torch.Tensor, *, compact: bool = False) -> torch.Tensor:
        """``[B, vocab]``; with ``compact``, ``[B, num_semantic + 1]`` (semantic ids, then EOS)."""
        if not compact:
            return F.linear(hidden, self.embeddings.weight)[:, -1]
        head = self.compact_head()
        return F.linear(hidden, head)[:, -1, : self.cfg.num_semantic + 1]

    def compact_head(self) -> torch.Tensor:
        """The tied rows of the semantic ids and EOS (a copy, padded; rebuilt if the weights move)."""
        weight = self.embeddings.weight
        head = self._head
        if head is None or head.dtype != weight.dtype or head.device != weight.device:
            cfg = self.cfg
            rows = [weight[cfg.semantic_begin_id: cfg.semantic_end_id + 1],
                    weight[cfg.eos_token_id:cfg.eos_token_id + 1]]
            n = cfg.num_semantic + 1
            pad = -n % HEAD_ROWS_MULTIPLE
            if pad:
                rows.append(weight[cfg.eos_token_id:cfg.eos_token_id + 1].expand(pad, -1))
            head = torch.cat(rows).detach().contiguous()
            self._head = head
        return head
