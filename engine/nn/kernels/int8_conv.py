"""1-D convolutions over int8 weights with the input quantized per tensor at run time, as onnxruntime
runs a dynamically quantized graph's ``ConvInteger`` (``kernels/int8_conv.cpp``): the products in int32 on
the CPU's int8 dot products (AVX-512 VNNI, AVX-VNNI, AVX2's ``vpmaddubsw``; portable C++ elsewhere), every
level the portable code's bits.

For weights a package stores as int8 already (Kokoro's from kokoro-onnx's int8 file: a scale per tensor
or per output channel). The input's quantization error (one scale per tensor and row, 8 bits) is what
such a layer changes against float32 arithmetic over the dequantized weights: the family docs give the
drift. Where the kernel cannot be built or is off (``AUDIOCPP_INT8_CONV=0``),
:func:`int8_conv` gives None and the caller keeps its float convolution.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from . import jit

KERNEL = jit.Kernel("int8_conv", "int8_conv.cpp", ("pack_weights", "conv1d", "variant"),
                    (jit.AVX512_VNNI, jit.AVX_VNNI, jit.AVX2, jit.GENERIC), switch="AUDIOCPP_INT8_CONV")


def reference(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None,
              stride: int, padding: int, dilation: int) -> torch.Tensor:
    """The kernel's arithmetic in torch (float64 products, exact for these sizes): ``x [B, cin, T]``."""
    out = []
    for row in x:
        lo, hi = torch.clamp(row.min(), max=0.0), torch.clamp(row.max(), min=0.0)
        s = (hi - lo) / 255.0
        if float(s) == 0.0:
            s, zp = torch.tensor(1.0), 0
        else:
            zp = int(torch.clamp(torch.round(0.0 - lo / s), 0, 255))
        q = torch.clamp(torch.round(row / s) + zp, 0, 255) - zp
        acc = F.conv1d(q.double()[None], weight.double(), stride=stride, padding=padding,
                       dilation=dilation)[0]
        y = acc.float() * (s * scale.reshape(-1, 1).float())
        out.append(y + bias.reshape(-1, 1) if bias is not None else y)
    return torch.stack(out)


@cache
def kernel() -> Any | None:
    module = jit.build_checked(KERNEL, _problem)
    return None if module is None else module


@cache
def kernel_at(level: str) -> Any | None:
    return jit.build_checked(KERNEL, _problem, level=level)


def _problem(module: Any) -> str | None:
    generator = torch.Generator().manual_seed(0)
    for cin, cout, k, stride, pad, dil, frames in ((7, 19, 3, 1, 1, 1, 33), (32, 16, 5, 2, 2, 3, 101)):
        w = torch.randint(-128, 128, (cout, cin, k), dtype=torch.int8, generator=generator)
        scale = torch.rand(cout, generator=generator) * 0.01 + 1e-3
        bias = torch.randn(cout, generator=generator)
        x = torch.randn(2, cin, frames, generator=generator) * 3
        sums = w.to(torch.int32).sum((1, 2)).to(torch.int32)
        got = module.conv1d(x, *module.pack_weights(w), sums, scale, bias, cout, k, stride, pad, dil)
        want = reference(x, w, scale, bias, stride, pad, dil)
        if got.shape != want.shape or not torch.allclose(got, want, rtol=1e-5, atol=1e-5):
            return "the built kernel's sums are not the reference's"
    return None


class Int8Conv1d(nn.Module):
    """A one-group ``nn.Conv1d`` (numeric zero padding) computed on the int8 kernel from its stored int8
    ``weight`` ``[cout, cin, k]`` and ``scale`` (scalar, or one per output channel)."""

    def __init__(self, conv: nn.Conv1d, weight: torch.Tensor, scale: torch.Tensor, op: Any) -> None:
        super().__init__()
        self.op = op
        self.stride, self.padding, self.dilation = conv.stride[0], int(conv.padding[0]), conv.dilation[0]
        self.cout, self.k = weight.shape[0], weight.shape[2]
        packed, offsets, groups, values = op.pack_weights(weight.to(torch.int8).contiguous())
        self.register_buffer("packed", packed)
        self.register_buffer("rest_offsets", offsets)
        self.register_buffer("rest_groups", groups)
        self.register_buffer("rest_values", values)
        self.register_buffer("wsum", weight.sum((1, 2), dtype=torch.int32))
        per_channel = torch.broadcast_to(scale.to(torch.float32).reshape(-1), (self.cout,))
        self.register_buffer("scale", per_channel.contiguous())
        bias = conv.bias.detach().to(torch.float32) if conv.bias is not None else torch.empty(0)
        self.register_buffer("bias", bias.contiguous())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rest = (self.rest_offsets, self.rest_groups, self.rest_values)
        return self.op.conv1d(x.contiguous().float(), self.packed, *rest, self.wsum, self.scale, self.bias,
                              self.cout, self.k, self.stride, self.padding, self.dilation)


def applies(conv: nn.Module) -> bool:
    """Whether the int8 layer can stand for ``conv`` (a one-group ``Conv1d`` with numeric zero padding, on
    the CPU or still on the meta device) and the kernel is built: what :func:`int8_conv` will swap."""
    return (type(conv) is nn.Conv1d and conv.groups == 1 and conv.padding_mode == "zeros"
            and not isinstance(conv.padding, str) and conv.weight.device.type in ("cpu", "meta")
            and kernel() is not None)


def int8_conv(conv: nn.Module, weight: torch.Tensor, scale: torch.Tensor) -> Int8Conv1d | None:
    """The int8 layer for ``conv`` where it applies (a one-group ``Conv1d`` with numeric zero padding on the
    CPU, the kernel built), else None."""
    if not applies(conv) or conv.weight.device.type != "cpu":
        return None
    op = kernel()
    return None if op is None else Int8Conv1d(conv, weight, scale, op)
