"""The codec's quantizer (upstream ``ArkttsDownsampleQuantizer``): 4x causal downsampling with
ConvNeXt blocks, the ``pre_module`` window transformer, one semantic VQ (4096 x 8) and nine
residual VQs (1024 x 8) with cosine-similarity lookup, then ``post_module`` and 4x causal
upsampling on the way back. Decoding clamps semantic codes to 0..4095 and residual codes to
0..1023, as upstream does (the fast AR emits residual codes up to 4095).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from audiocpp.engine.nn.layers.dac import CausalConv1d, CausalConvTranspose1d, StreamState

from ..config import CodecConfig
from .transformer import WindowTransformer, WindowTransformerConfig


class VectorQuantizer(nn.Module):
    def __init__(self, input_dim: int, codebook_size: int, codebook_dim: int) -> None:
        super().__init__()
        self.codebook_size = codebook_size
        self.in_proj = nn.Conv1d(input_dim, codebook_dim, kernel_size=1)
        self.out_proj = nn.Conv1d(codebook_dim, input_dim, kernel_size=1)
        self.codebook = nn.Embedding(codebook_size, codebook_dim)

    def decode_code(self, indices: torch.Tensor) -> torch.Tensor:
        return F.embedding(indices, self.codebook.weight).transpose(1, 2)

    def forward(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(out_proj of the straight-through value, indices), exactly as upstream's forward."""
        projected = self.in_proj(z)
        batch, _, length = projected.shape
        flat = F.normalize(projected.transpose(1, 2).reshape(batch * length, -1))
        codebook = F.normalize(self.codebook.weight)
        distances = (flat.pow(2).sum(1, keepdim=True) - 2 * flat @ codebook.t()
                     + codebook.pow(2).sum(1, keepdim=True).t())
        indices = (-distances).argmax(1).view(batch, length)
        quantized = self.decode_code(indices)
        return self.out_proj(projected + (quantized - projected)), indices


class ResidualQuantizer(nn.Module):
    def __init__(self, input_dim: int, n_codebooks: int, codebook_size: int, codebook_dim: int) -> None:
        super().__init__()
        self.codebook_size = codebook_size
        self.quantizers = nn.ModuleList(VectorQuantizer(input_dim, codebook_size, codebook_dim)
                                        for _ in range(n_codebooks))

    def forward(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        total: torch.Tensor | float = 0.0
        residual = z
        codes = []
        for quantizer in self.quantizers:
            quantized, indices = quantizer(residual)
            total = total + quantized
            residual = residual - quantized
            codes.append(indices)
        return total, torch.stack(codes, dim=1)  # type: ignore[return-value]

    def from_codes(self, codes: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor | float = 0.0
        for i in range(codes.shape[1]):
            out = out + self.quantizers[i].out_proj(self.quantizers[i].decode_code(codes[:, i]))
        return out  # type: ignore[return-value]


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dwconv = CausalConv1d(dim, dim, kernel_size=7, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.full((dim,), 1e-6))  # no arithmetic on meta: it imports dynamo

    def _rest(self, residual: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        x = x.permute(0, 2, 1)
        x = self.pwconv2(self.act(self.pwconv1(self.norm(x))))
        return residual + (self.gamma * x).permute(0, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._rest(x, self.dwconv(x))

    def stream(self, x: torch.Tensor, state: StreamState) -> torch.Tensor:
        return self._rest(x, self.dwconv.stream(x, state))


def _stage(conv: nn.Module, dim: int) -> nn.Sequential:
    return nn.Sequential(conv, ConvNeXtBlock(dim))


class DownsampleQuantizer(nn.Module):
    def __init__(self, cfg: CodecConfig) -> None:
        super().__init__()
        d = cfg.latent_dim
        self.semantic_quantizer = ResidualQuantizer(d, 1, cfg.semantic_codebook_size, cfg.codebook_dim)
        self.quantizer = ResidualQuantizer(d, cfg.residual_codebooks, cfg.residual_codebook_size,
                                           cfg.codebook_dim)
        self.downsample = nn.Sequential(*(_stage(CausalConv1d(d, d, 2, stride=2), d) for _ in range(2)))
        self.upsample = nn.Sequential(*(_stage(CausalConvTranspose1d(d, d, 2, stride=2), d)
                                        for _ in range(2)))
        self.pre_module = WindowTransformer(WindowTransformerConfig(
            n_layer=cfg.pre_n_layer, n_head=cfg.pre_n_head, n_local_heads=cfg.pre_n_local_heads, dim=d,
            intermediate_size=cfg.pre_intermediate_size, head_dim=cfg.pre_head_dim,
            window=cfg.quantizer_window))
        self.post_module = WindowTransformer(WindowTransformerConfig(
            n_layer=cfg.post_n_layer, n_head=cfg.post_n_head, n_local_heads=cfg.post_n_local_heads, dim=d,
            intermediate_size=cfg.post_intermediate_size, head_dim=cfg.post_head_dim,
            window=cfg.quantizer_window))

    def encode(self, z: torch.Tensor) -> torch.Tensor:
        """Codes ``[B, 10, T/4]`` of encoder latents (upstream's forward, without the unused decode)."""
        z = self.pre_module(self.downsample(z))
        semantic, semantic_codes = self.semantic_quantizer(z)
        _, residual_codes = self.quantizer(z - semantic)
        return torch.cat((semantic_codes, residual_codes), dim=1)

    def latents(self, codes: torch.Tensor) -> torch.Tensor:
        """The VQ sum of ``codes`` ``[B, 10, T]`` (clamped as upstream's ``decode``)."""
        codes = codes.clone()
        codes[:, 0].clamp_(0, self.semantic_quantizer.codebook_size - 1)
        codes[:, 1:].clamp_(0, self.quantizer.codebook_size - 1)
        semantic = self.semantic_quantizer.from_codes(codes[:, :1])
        residual = self.quantizer.from_codes(codes[:, 1:])
        return semantic + residual

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        return self.upsample(self.post_module(self.latents(codes)))

    def stream(self, codes: torch.Tensor, state: StreamState) -> torch.Tensor:
        x = self.post_module.stream(self.latents(codes), state)
        for stage in self.upsample:
            x = stage[1].stream(stage[0].stream(x, state), state)
        return x
