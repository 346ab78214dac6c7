"""DAC-style convolution blocks: causal and centred convs, transposed upsampling, residual units.

Weight norm is folded at load time (``engine.weights.FoldWeightNorm`` reads both key styles:
``*.parametrizations.weight.original0/1`` and ``*.weight_g/_v``), so the convs here are plain
``nn.Conv1d`` / ``nn.ConvTranspose1d`` held as ``.conv`` where the checkpoints nest them.

Causal blocks also run incrementally: ``stream(x, state)`` takes the next samples of a
sequence and returns the outputs they complete, keeping what later calls need (the left
context of a conv, the last frame of a transposed conv) in ``state`` (a dict owned by the
caller, keyed by module). Concatenated stream outputs equal the offline output up to float
summation order.

Used by Audio8 TTS's codec only: OmniVoice's and VoxCPM's codecs keep private stacks, each saying
why at its top (centred strided convs and transformers' names; unnested convs and v1's padding).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from . import activations

StreamState = dict[Any, torch.Tensor]


def snake(x: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """``activations.snake`` bit for bit (same operations, same order), with one allocation
    instead of five: the elementwise passes run in place (about 2x faster on long signals)."""
    shape = x.shape
    x = x.reshape(shape[0], shape[1], -1)
    out = torch.mul(alpha, x)
    out.sin_()
    out.pow_(2)
    out.mul_((alpha + 1e-9).reciprocal())
    out.add_(x)
    return out.reshape(shape)


class Snake1d(activations.Snake1d):
    """``activations.Snake1d`` (parameter ``alpha`` of shape ``[1, C, 1]``) computed by :func:`snake`."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return snake(x, self.alpha)


def extra_padding(length: int, kernel_size: int, stride: int, padding_total: int = 0) -> int:
    """Right padding that makes the last window of a strided conv complete (DAC / encodec)."""
    frames = (length - kernel_size + padding_total) / stride + 1
    ideal = (math.ceil(frames) - 1) * stride + kernel_size - padding_total
    return ideal - length


def centred_conv1d(in_channels: int, out_channels: int, kernel_size: int, *, dilation: int = 1,
                   stride: int = 1, groups: int = 1, bias: bool = True) -> nn.Conv1d:
    """DAC's original (non-causal) conv: ``padding = dilation * (kernel_size - 1) // 2``."""
    return nn.Conv1d(in_channels, out_channels, kernel_size, stride=stride, dilation=dilation, groups=groups,
                     padding=dilation * (kernel_size - 1) // 2, bias=bias)


class CausalConv1d(nn.Module):
    """Left-padded conv: ``(k - 1) * dilation + 1 - stride`` zeros before, and after whatever
    completes the last stride. The conv is ``.conv`` (checkpoint names ``<m>.conv.weight``)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, dilation: int = 1,
                 stride: int = 1, groups: int = 1, bias: bool = True) -> None:
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, stride=stride, dilation=dilation,
                              groups=groups, bias=bias)
        self.stride = stride
        self.kernel_size = (kernel_size - 1) * dilation + 1
        self.padding = self.kernel_size - self.stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        right = extra_padding(x.shape[-1], self.kernel_size, self.stride, self.padding)
        return self.conv(F.pad(x, (self.padding, right))).contiguous()

    def stream(self, x: torch.Tensor, state: StreamState) -> torch.Tensor:
        """Incremental form (stride 1 only): the outputs of the new samples ``x``."""
        if self.stride != 1:
            raise ValueError("only stride-1 causal convs stream")
        if self.padding == 0:
            return self.conv(x).contiguous()
        past = state.get(self)
        if past is None:
            past = x.new_zeros(*x.shape[:-1], self.padding)
        full = torch.cat((past, x), dim=-1)
        state[self] = full[..., -self.padding:]
        return self.conv(full).contiguous()


class CausalConvTranspose1d(nn.Module):
    """Transposed conv that crops ``kernel_size - stride`` samples at the end (causal upsampling)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 dilation: int = 1) -> None:
        super().__init__()
        self.conv = nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride=stride,
                                       dilation=dilation)
        self.stride = stride
        self.kernel_size = kernel_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        crop = self.kernel_size - self.stride
        return x[..., : x.shape[-1] - crop].contiguous() if crop else x.contiguous()

    def stream(self, x: torch.Tensor, state: StreamState) -> torch.Tensor:
        """Incremental form for ``kernel_size <= 2 * stride``: ``stride`` outputs per new frame."""
        s, k = self.stride, self.kernel_size
        if k > 2 * s or self.conv.dilation[0] != 1:
            raise ValueError("this transposed conv does not stream (kernel > 2 * stride or dilated)")
        past = state.get(self)
        if past is None:
            past = x.new_zeros(*x.shape[:-1], 1)
        full = torch.cat((past, x), dim=-1)
        state[self] = x[..., -1:]
        y = self.conv(full)
        return y[..., s: s + x.shape[-1] * s].contiguous()


class ResidualUnit(nn.Module):
    """``x + conv1x1(snake(conv_k(snake(x))))`` (``block.0..3``); the residual is trimmed to
    the output length, at the end when causal, on both sides when centred (DAC)."""

    def __init__(self, dim: int, dilation: int, kernel_size: int = 7, *, causal: bool = True) -> None:
        super().__init__()
        self.causal = causal
        if causal:
            convs: tuple[nn.Module, nn.Module] = (CausalConv1d(dim, dim, kernel_size, dilation=dilation),
                                                  CausalConv1d(dim, dim, 1))
        else:
            convs = (centred_conv1d(dim, dim, kernel_size, dilation=dilation), centred_conv1d(dim, dim, 1))
        self.block = nn.Sequential(Snake1d(dim), convs[0], Snake1d(dim), convs[1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        diff = x.shape[-1] - y.shape[-1]
        if diff > 0:
            x = x[..., :-diff] if self.causal else x[..., diff // 2: x.shape[-1] - (diff - diff // 2)]
        return x + y

    def stream(self, x: torch.Tensor, state: StreamState) -> torch.Tensor:
        if not self.causal:
            raise ValueError("a centred residual unit does not stream")
        snake1, conv1, snake2, conv2 = self.block
        y = conv2.stream(snake2(conv1.stream(snake1(x), state)), state)
        return x + y


def stream_sequential(modules: nn.Sequential | list[nn.Module], x: torch.Tensor,
                      state: StreamState) -> torch.Tensor:
    """Run modules in order, streaming the ones that keep state; pointwise ones run as they are."""
    for module in modules:
        stream = getattr(module, "stream", None)
        x = stream(x, state) if stream is not None else module(x)
    return x
