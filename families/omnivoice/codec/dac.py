"""The DAC acoustic encoder and decoder of the Higgs Audio v2 codec (transformers' ``Dac*``
modules, with the codec's adjustments: ``output_padding = stride % 2`` in every transposed
conv of the decoder and no final tanh). Weight norm, where a checkpoint has it, is folded at
load time, so the convs here are plain.

Private, not ``engine.nn.layers.dac``: the residual unit is the same maths as the engine's centred
``ResidualUnit``, but these modules carry transformers' names (``res_unit1.snake1``,
``conv1``, ``conv_t1``), which the snapshot, our packages and omnivoice.cpp's GGUFs all use,
where the engine's follow DAC's ``block.0..3``; and the strided convs here are centred
(``padding = ceil(stride / 2)``, ``output_padding = stride % 2``), not the engine's causal ones.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from audiocpp.engine.nn.layers.activations import Snake1d

from ..config import DacConfig


class DacResidualUnit(nn.Module):
    def __init__(self, dim: int, dilation: int) -> None:
        super().__init__()
        self.snake1 = Snake1d(dim)
        self.conv1 = nn.Conv1d(dim, dim, kernel_size=7, dilation=dilation, padding=((7 - 1) * dilation) // 2)
        self.snake2 = Snake1d(dim)
        self.conv2 = nn.Conv1d(dim, dim, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv2(self.snake2(self.conv1(self.snake1(x))))
        pad = (x.shape[-1] - y.shape[-1]) // 2
        if pad > 0:
            x = x[..., pad:-pad]
        return x + y


class DacEncoderBlock(nn.Module):
    def __init__(self, dim: int, stride: int) -> None:
        super().__init__()
        self.res_unit1 = DacResidualUnit(dim // 2, 1)
        self.res_unit2 = DacResidualUnit(dim // 2, 3)
        self.res_unit3 = DacResidualUnit(dim // 2, 9)
        self.snake1 = Snake1d(dim // 2)
        self.conv1 = nn.Conv1d(dim // 2, dim, kernel_size=2 * stride, stride=stride,
                               padding=math.ceil(stride / 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.res_unit3(self.res_unit2(self.res_unit1(x)))
        return self.conv1(self.snake1(x))


class DacDecoderBlock(nn.Module):
    def __init__(self, in_dim: int, out_dim: int, stride: int) -> None:
        super().__init__()
        self.snake1 = Snake1d(in_dim)
        self.conv_t1 = nn.ConvTranspose1d(in_dim, out_dim, kernel_size=2 * stride, stride=stride,
                                          padding=math.ceil(stride / 2), output_padding=stride % 2)
        self.res_unit1 = DacResidualUnit(out_dim, 1)
        self.res_unit2 = DacResidualUnit(out_dim, 3)
        self.res_unit3 = DacResidualUnit(out_dim, 9)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv_t1(self.snake1(x))
        return self.res_unit3(self.res_unit2(self.res_unit1(x)))


class DacEncoder(nn.Module):
    def __init__(self, cfg: DacConfig) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(1, cfg.encoder_hidden_size, kernel_size=7, padding=3)
        self.block = nn.ModuleList(
            DacEncoderBlock(cfg.encoder_hidden_size * 2 ** (i + 1), stride)
            for i, stride in enumerate(cfg.downsampling_ratios)
        )
        d_model = cfg.encoder_hidden_size * 2 ** len(cfg.downsampling_ratios)
        self.snake1 = Snake1d(d_model)
        self.conv2 = nn.Conv1d(d_model, cfg.hidden_size, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        for block in self.block:
            x = block(x)
        return self.conv2(self.snake1(x))

    def output_length(self, length: int) -> int:
        """The frame count for ``length`` samples, as transformers computes it (every Conv1d
        in module order, ``int((L + 2p - d(k-1) - 1) / s + 1)``)."""
        for m in self.modules():
            if isinstance(m, nn.Conv1d):
                length = int((length + 2 * m.padding[0] - m.dilation[0] * (m.kernel_size[0] - 1) - 1)
                             / m.stride[0] + 1)
        return length


class DacDecoder(nn.Module):
    def __init__(self, cfg: DacConfig) -> None:
        super().__init__()
        channels = cfg.decoder_hidden_size
        self.conv1 = nn.Conv1d(cfg.hidden_size, channels, kernel_size=7, padding=3)
        self.block = nn.ModuleList(
            DacDecoderBlock(channels // 2 ** i, channels // 2 ** (i + 1), stride)
            for i, stride in enumerate(cfg.upsampling_ratios)
        )
        out_dim = channels // 2 ** len(cfg.upsampling_ratios)
        self.snake1 = Snake1d(out_dim)
        self.conv2 = nn.Conv1d(out_dim, 1, kernel_size=7, padding=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        for block in self.block:
            x = block(x)
        return self.conv2(self.snake1(x))
