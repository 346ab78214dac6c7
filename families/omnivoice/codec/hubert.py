"""HuBERT, the semantic encoder of the Higgs Audio v2 codec (transformers' ``HubertModel``
in eval mode): conv feature extractor, feature projection, positional conv (weight norm
folded at load time) and the transformer layers. Returns every hidden state, as
``output_hidden_states=True`` does: the input of layer 0, then each layer's output."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from audiocpp.engine.nn.layers.attention import sdpa

from ..config import HubertConfig


class HubertConvLayer(nn.Module):
    """A feature-extractor conv: GroupNorm on the first layer (``feat_extract_norm="group"``),
    LayerNorm on every layer (``"layer"``), or none."""

    def __init__(self, cfg: HubertConfig, i: int) -> None:
        super().__init__()
        in_dim = cfg.conv_dim[i - 1] if i > 0 else 1
        out_dim = cfg.conv_dim[i]
        self.conv = nn.Conv1d(in_dim, out_dim, kernel_size=cfg.conv_kernel[i], stride=cfg.conv_stride[i],
                              bias=cfg.conv_bias)
        self.norm_kind = "layer" if cfg.feat_extract_norm == "layer" else ("group" if i == 0 else "")
        if self.norm_kind == "group":
            self.layer_norm: nn.Module | None = nn.GroupNorm(out_dim, out_dim, affine=True)
        elif self.norm_kind == "layer":
            self.layer_norm = nn.LayerNorm(out_dim, elementwise_affine=True)
        else:
            self.layer_norm = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        if self.norm_kind == "group":
            x = self.layer_norm(x)
        elif self.norm_kind == "layer":
            x = self.layer_norm(x.transpose(-2, -1)).transpose(-2, -1)
        return F.gelu(x)


class HubertFeatureEncoder(nn.Module):
    def __init__(self, cfg: HubertConfig) -> None:
        super().__init__()
        self.conv_layers = nn.ModuleList(HubertConvLayer(cfg, i) for i in range(len(cfg.conv_dim)))

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        x = wav[:, None]
        for layer in self.conv_layers:
            x = layer(x)
        return x


class HubertFeatureProjection(nn.Module):
    def __init__(self, cfg: HubertConfig) -> None:
        super().__init__()
        self.use_norm = cfg.feat_proj_layer_norm
        if self.use_norm:
            self.layer_norm = nn.LayerNorm(cfg.conv_dim[-1], eps=cfg.layer_norm_eps)
        self.projection = nn.Linear(cfg.conv_dim[-1], cfg.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.projection(self.layer_norm(x) if self.use_norm else x)


class HubertPositionalConvEmbedding(nn.Module):
    def __init__(self, cfg: HubertConfig) -> None:
        super().__init__()
        k = cfg.num_conv_pos_embeddings
        self.conv = nn.Conv1d(cfg.hidden_size, cfg.hidden_size, kernel_size=k, padding=k // 2,
                              groups=cfg.num_conv_pos_embedding_groups)
        self.remove = 1 if k % 2 == 0 else 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x.transpose(1, 2))
        if self.remove:
            y = y[:, :, : -self.remove]
        return F.gelu(y).transpose(1, 2)


class HubertAttention(nn.Module):
    def __init__(self, cfg: HubertConfig) -> None:
        super().__init__()
        dim = cfg.hidden_size
        self.head_dim = dim // cfg.num_attention_heads
        self.scale = self.head_dim ** -0.5
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.q_proj = nn.Linear(dim, dim)
        self.out_proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = (*x.shape[:-1], -1, self.head_dim)
        q = self.q_proj(x).view(shape).transpose(1, 2)
        k = self.k_proj(x).view(shape).transpose(1, 2)
        v = self.v_proj(x).view(shape).transpose(1, 2)
        return self.out_proj(sdpa(q, k, v, None, scale=self.scale))


class HubertFeedForward(nn.Module):
    def __init__(self, cfg: HubertConfig) -> None:
        super().__init__()
        self.intermediate_dense = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.output_dense = nn.Linear(cfg.intermediate_size, cfg.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output_dense(F.gelu(self.intermediate_dense(x)))


class HubertEncoderLayer(nn.Module):
    def __init__(self, cfg: HubertConfig) -> None:
        super().__init__()
        self.stable = cfg.do_stable_layer_norm
        self.attention = HubertAttention(cfg)
        self.layer_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.feed_forward = HubertFeedForward(cfg)
        self.final_layer_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stable:
            x = x + self.attention(self.layer_norm(x))
            return x + self.feed_forward(self.final_layer_norm(x))
        x = self.layer_norm(x + self.attention(x))
        return self.final_layer_norm(x + self.feed_forward(x))


class HubertEncoder(nn.Module):
    def __init__(self, cfg: HubertConfig) -> None:
        super().__init__()
        self.stable = cfg.do_stable_layer_norm
        self.pos_conv_embed = HubertPositionalConvEmbedding(cfg)
        self.layer_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.layers = nn.ModuleList(HubertEncoderLayer(cfg) for _ in range(cfg.num_hidden_layers))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = x + self.pos_conv_embed(x)
        if not self.stable:
            x = self.layer_norm(x)
        states = [x]
        for layer in self.layers:
            x = layer(x)
            states.append(x)
        # The stable-layer-norm variant's final norm only feeds last_hidden_state; the hidden
        # states transformers returns (tie_last_hidden_states=False) stop before it.
        return states


class HubertModel(nn.Module):
    def __init__(self, cfg: HubertConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.feature_extractor = HubertFeatureEncoder(cfg)
        self.feature_projection = HubertFeatureProjection(cfg)
        self.encoder = HubertEncoder(cfg)

    def forward(self, wav: torch.Tensor) -> list[torch.Tensor]:
        """(B, N) 16 kHz audio -> the L+1 hidden states, each (B, T, hidden)."""
        features = self.feature_extractor(wav).transpose(1, 2)
        return self.encoder(self.feature_projection(features))

    def skip_layerdrop_draws(self, generator: torch.Generator | None) -> None:
        """transformers' HuBERT draws a LayerDrop probability (``torch.rand([])``) from the global
        RNG before every layer, in eval mode too. Taking the same draws from a request's
        generator keeps seeded cloning on upstream's random stream (and makes a cached
        encode or a saved voice prompt give the same audio as a fresh encode)."""
        for _ in self.encoder.layers:
            torch.rand((), generator=generator)
