"""Linear layers that keep a Q8_0 / Q4_0 package's weights quantized in memory and compute with them.

On a CPU with AVX512-VNNI, Q8_0 and Q4_0 matrices keep their own blocks (8 or 4 bits resident)
and run on :mod:`engine.nn.linear.q8_0_linear` (int8 rows per block of 32, as ggml computes): the fastest
and the most accurate path measured here. This module holds the rest; which layer a matrix takes
is decided in one place, ``engine.nn.linear.choice`` (``block_linear`` for one stored matrix,
``quantize_linears`` for a module):

- Q4_0 maps exactly onto ``torch._weight_int4pack_mm_for_cpu`` (groups of 32, value =
  (nibble - 8) * scale + 0): 4-bit weights resident, bfloat16 rows (:class:`Int4Linear`); 2.8x
  slower than the bfloat16 GEMM at 400 rows, where the VNNI kernel is 1.5x faster than it.
- Everywhere else (CUDA, MPS, a CPU without VNNI or a compiler, ``AUDIOCPP_Q8_0_KERNEL=0``) the
  int8 layer :class:`Int8Linear`: each matrix requantized at load to one scale per output row
  (the row's largest value / 127), which doubles Q8_0's weight error (0.5 % -> 1.0 % relative
  output error on random weights). On the CPU it computes up to 16 bfloat16 rows with
  ``torch._weight_int8pack_mm`` (1.2-1.7x the oneDNN bfloat16 GEMM at one row: it reads half the
  bytes) and more rows by converting the int8 matrix to bfloat16 (exact) for the bfloat16 GEMM,
  5-15 % slower than bfloat16 weights at 400 rows; on other devices always the latter (int8
  resident, one transient matrix per layer).

Measured side by side in ``tools/bench_kernels.py`` (figures in docs/numerics.md); ``torch.ao``'s
dynamic int8 linear (activations quantized per tensor: 10-12 % error with outlier channels) and
``torch._int_mm`` with int8 rows (per row: 4-5 %) are not used.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ...weights.blocks import BlockTensor
from . import q8_0_linear

#: At most this many rows per call take ``_weight_int8pack_mm`` on the CPU; more rows convert the
#: weights and use the bfloat16 GEMM (crossover measured at 16-32 rows for 1024-6144 features).
INT8PACK_MAX_ROWS = 16
#: Rows requantized at a time at load (bounds the float32 transient).
_CHUNK_ROWS = 512


@cache
def int8pack_available() -> bool:
    try:
        y = torch._weight_int8pack_mm(torch.ones(1, 32, dtype=torch.bfloat16),
                                      torch.ones(8, 32, dtype=torch.int8),
                                      torch.ones(8, dtype=torch.bfloat16))
        return tuple(y.shape) == (1, 8)
    except (RuntimeError, AttributeError, NotImplementedError):
        return False


@cache
def int4pack_available() -> bool:
    try:
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(torch.zeros(32, 64, dtype=torch.int32),
                                                                    2)
        sz = torch.zeros(2, 32, 2, dtype=torch.bfloat16)
        y = torch.ops.aten._weight_int4pack_mm_for_cpu(torch.ones(1, 64, dtype=torch.bfloat16), packed, 32,
                                                       sz)
        return tuple(y.shape) == (1, 32)
    except (RuntimeError, AttributeError, NotImplementedError):
        return False


def requantize_rows(blocks: BlockTensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A block-quantized matrix as int8 values with one float32 scale per row: ``w ~= q * s[:, None]``.
    The scale is the row's largest |value| / 127 (the blocks with the row's largest scale keep their
    values exactly). Works through ``_CHUNK_ROWS`` rows at a time."""
    rows, cols = blocks.shape
    values, scales = blocks.values(), blocks.scales()
    q = torch.empty((rows, cols), dtype=torch.int8)
    s = torch.empty(rows, dtype=torch.float32)
    for lo in range(0, rows, _CHUNK_ROWS):
        hi = min(rows, lo + _CHUNK_ROWS)
        w = torch.from_numpy(values[lo:hi].astype(np.float32)).view(hi - lo, cols // 32, 32)
        w *= torch.from_numpy(scales[lo:hi])[:, :, None]
        w = w.view(hi - lo, cols)
        scale = w.abs().amax(dim=1) / 127.0
        s[lo:hi] = scale
        q[lo:hi] = (torch.round(w / torch.where(scale > 0, scale, 1.0)[:, None])
                    .clamp_(-127, 127).to(torch.int8))
    return q, s


class Int8Linear(nn.Module):
    """``y = (x q^T) * s + b``: int8 weights ``q`` (out, in) with one scale per output row.

    ``qweight`` and ``scale`` are non-persistent buffers (they are not the checkpoint's names);
    ``bias`` is an ordinary parameter, loaded by name."""

    def __init__(self, qweight: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        self.out_features, self.in_features = qweight.shape
        self.register_buffer("qweight", qweight.contiguous(), persistent=False)
        self.register_buffer("scale", scale.contiguous(), persistent=False)
        self.bias = None if bias is None else nn.Parameter(bias, requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        rows = x.reshape(-1, self.in_features)
        if rows.device.type == "cpu" and rows.dtype == torch.bfloat16 and rows.shape[0] <= INT8PACK_MAX_ROWS \
                and int8pack_available():
            y = torch._weight_int8pack_mm(rows.contiguous(), self.qweight, self.scale.to(torch.bfloat16))
        else:
            y = F.linear(rows, self.qweight.to(rows.dtype)) * self.scale.to(rows.dtype)
        if self.bias is not None:
            y = y + self.bias.to(y.dtype)
        return y.reshape(*lead, self.out_features)

    def dequantized(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The weight matrix these int8 values and scales stand for."""
        return self.qweight.to(dtype) * self.scale.to(dtype)[:, None]

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 per-row scales"


class Int4Linear(nn.Module):
    """``y = x W^T + b`` with Q4_0's 4-bit values and block scales packed for
    ``torch._weight_int4pack_mm_for_cpu`` (CPU only; bfloat16 rows)."""

    GROUP = 32

    def __init__(self, packed: torch.Tensor, scale_zeros: torch.Tensor, out_features: int, in_features: int,
                 bias: torch.Tensor | None = None) -> None:
        super().__init__()
        self.out_features, self.in_features = out_features, in_features
        self.register_buffer("packed", packed, persistent=False)
        self.register_buffer("scale_zeros", scale_zeros, persistent=False)
        self.bias = None if bias is None else nn.Parameter(bias, requires_grad=False)

    @classmethod
    def from_blocks(cls, blocks: BlockTensor) -> Int4Linear:
        rows, cols = blocks.shape
        nibbles = torch.from_numpy(blocks.nibbles().astype(np.int32))
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(nibbles, 2)
        d = torch.from_numpy(blocks.scales()).t()  # (cols / 32, rows)
        scale_zeros = torch.stack([d, torch.zeros_like(d)], dim=-1).to(torch.bfloat16).contiguous()
        return cls(packed, scale_zeros, rows, cols)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        rows = x.reshape(-1, self.in_features).to(torch.bfloat16).contiguous()
        y = torch.ops.aten._weight_int4pack_mm_for_cpu(rows, self.packed, self.GROUP,
                                                       self.scale_zeros).to(x.dtype)
        if self.bias is not None:
            y = y + self.bias.to(y.dtype)
        return y.reshape(*lead, self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int4 groups of 32 (Q4_0)"


#: Every quantized layer type (``engine.nn.linear.choice.block_linear`` picks one).
QUANTIZED_LAYERS = (Int8Linear, Int4Linear, q8_0_linear.Q8_0Linear)


def quantized_bytes(module: nn.Module) -> int:
    """Bytes held by the quantized layers under ``module`` (values and scales)."""
    total = 0
    for child in module.modules():
        if isinstance(child, QUANTIZED_LAYERS):
            total += sum(b.numel() * b.element_size() for b in child.buffers(recurse=False))
    return total
