"""PL-BERT, Kokoro's phoneme encoder: transformers' ``AlbertModel`` as ``KModel.bert`` runs it, with
upstream's parameter names (``embeddings.*``, ``encoder.embedding_hidden_mapping_in``,
``encoder.albert_layer_groups.G.albert_layers.L.*``) so hexgrad's ``bert`` state dict loads 1:1.

ALBERT is a post-norm encoder whose ``num_hidden_layers`` passes reuse the layers of
``num_hidden_groups`` groups (one shared layer in Kokoro). Kept here rather than on
``engine.nn.layers.decoder``'s pre-norm ``DecoderLayer``: the norm placement, the biases and the GELU-tanh
MLP differ, and the names must stay upstream's. The arithmetic follows transformers 5 op for op:
the same ``scaled_dot_product_attention`` call (no mask for an unpadded row, an additive mask for
padded rows of a batch), ``gelu_new`` written out as transformers writes it.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..config import AlbertConfig


def gelu_new(x: torch.Tensor) -> torch.Tensor:
    """transformers' ``NewGELUActivation`` (``hidden_act="gelu_new"``, ALBERT's default)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class AlbertEmbeddings(nn.Module):
    def __init__(self, cfg: AlbertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.embedding_size)
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, cfg.embedding_size)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.embedding_size)
        self.LayerNorm = nn.LayerNorm(cfg.embedding_size, eps=cfg.layer_norm_eps)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        length = input_ids.shape[1]
        positions = torch.arange(length, device=input_ids.device).unsqueeze(0)
        token_types = torch.zeros_like(positions)
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_types)
        x = x + self.position_embeddings(positions)
        return self.LayerNorm(x)


class AlbertAttention(nn.Module):
    def __init__(self, cfg: AlbertConfig) -> None:
        super().__init__()
        self.heads, self.head_dim = cfg.num_attention_heads, cfg.head_dim
        self.scaling = self.head_dim ** -0.5
        self.query = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.key = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.value = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        shape = (*x.shape[:-1], -1, self.head_dim)
        q = self.query(x).view(shape).transpose(1, 2)
        k = self.key(x).view(shape).transpose(1, 2)
        v = self.value(x).view(shape).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, scale=self.scaling,
                                             is_causal=False)
        out = out.transpose(1, 2).contiguous().reshape(*x.shape[:-1], -1).contiguous()
        return self.LayerNorm(x + self.dense(out))


class AlbertLayer(nn.Module):
    def __init__(self, cfg: AlbertConfig) -> None:
        super().__init__()
        self.full_layer_layer_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.attention = AlbertAttention(cfg)
        self.ffn = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.ffn_output = nn.Linear(cfg.intermediate_size, cfg.hidden_size)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        attended = self.attention(x, mask)
        return self.full_layer_layer_norm(self.ffn_output(gelu_new(self.ffn(attended))) + attended)


class AlbertLayerGroup(nn.Module):
    def __init__(self, cfg: AlbertConfig) -> None:
        super().__init__()
        self.albert_layers = nn.ModuleList(AlbertLayer(cfg) for _ in range(cfg.inner_group_num))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        for layer in self.albert_layers:
            x = layer(x, mask)
        return x


class AlbertTransformer(nn.Module):
    def __init__(self, cfg: AlbertConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embedding_hidden_mapping_in = nn.Linear(cfg.embedding_size, cfg.hidden_size)
        self.albert_layer_groups = nn.ModuleList(AlbertLayerGroup(cfg) for _ in range(cfg.num_hidden_groups))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        x = self.embedding_hidden_mapping_in(x)
        per_group = self.cfg.num_hidden_layers // self.cfg.num_hidden_groups
        for i in range(self.cfg.num_hidden_layers):
            x = self.albert_layer_groups[i // per_group](x, mask)
        return x


class CustomAlbert(nn.Module):
    """``KModel.bert``: token ids ``[B, T]`` -> last hidden states ``[B, T, hidden]``. ``lengths`` (a
    batch's valid lengths) masks the padded keys as transformers' bidirectional mask does; ``None`` (or
    every row full) attends without a mask, as transformers does for an all-ones mask."""

    def __init__(self, cfg: AlbertConfig) -> None:
        super().__init__()
        self.config = cfg
        self.embeddings = AlbertEmbeddings(cfg)
        self.encoder = AlbertTransformer(cfg)

    def forward(self, input_ids: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        x = self.embeddings(input_ids)
        mask = None
        if lengths is not None and bool((lengths < input_ids.shape[1]).any()):
            keys = torch.arange(input_ids.shape[1], device=input_ids.device)[None, :] < lengths[:, None]
            mask = torch.zeros(keys.shape, dtype=x.dtype, device=x.device)
            mask.masked_fill_(~keys, torch.finfo(x.dtype).min)
            mask = mask[:, None, None, :]
        return self.encoder(x, mask)
