"""Linear layers that compute with a Q8_0 (or Q4_0) matrix's own blocks on the CPU (AVX512-VNNI).

Q8_0 stores a matrix as blocks of 32 int8 values along a row with one f16 scale each. This layer
keeps exactly those values and scales resident (34 bytes per 32 weights, as in the file) and
computes as ggml does: each row of the input is quantized per block of 32 to int8 with one float32
scale (``d = max|x| / 127``, values rounded half to even), the int8 dot product of each pair of
blocks is summed exactly in int32 by ``vpdpbusd``, and the block sums are accumulated in float32
weighted by the two scales::

    y[m, n] = sum_b  dx[m, b] * dw[n, b] * sum_{k in b} qx[m, k] * qw[n, k]

Scaling each block of the input on its own keeps the error of outlier channels to their own
blocks: about 0.5 % relative output error per layer against the Q8_0 matrix in float (the error
of Q8_0 itself is another 0.5 %; the per-row int8 layer it replaces was at 1.0 %), and it runs
1.5-3x faster than the oneDNN bfloat16 GEMM from one row to hundreds (``tools/bench_kernels.py``,
docs/numerics.md). A NaN or infinite input makes its row's outputs NaN, as float math would.
Q4_0 matrices run the same way with their 4-bit values (value = nibble - 8) kept 4-bit.

The kernel (``engine/nn/kernels/q8_0_linear.cpp``) is compiled on first use (``engine.nn.jit``;
``engine.nn.kernels.build_all`` at set-up) where the CPU has AVX512-VNNI; elsewhere,
off the CPU, or with ``AUDIOCPP_Q8_0_KERNEL=0``, quantized matrices take ``engine.nn.quantized``'s
int4 or int8 layers instead (``engine.nn.linear`` picks).

Layout: output features in groups of 16; for each group and block of 32 inputs, Q8_0: 512 bytes,
8 steps of (16 features x 4 consecutive inputs), the values stored unsigned (``q + 128``, as
``vpdpbusd`` takes them; the input's block sums put the offset back); Q4_0: 256 bytes, 4 steps
whose bytes hold step ``s`` in the low nibble and ``s + 4`` in the high one. Then the scales as f16
``(groups, blocks, 16)``, held as their int16 bits so that no dtype cast of the module alters them.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import torch
from torch import nn

from ..weights.blocks import BLOCK, BlockTensor
from . import jit

#: Output features per group of the packed layout (one AVX-512 register of int32 sums).
GROUP = 16
#: Rows packed at a time at load (bounds the int8 copy taken from the file).
_CHUNK_ROWS = 1024

#: The instruction sets the kernel is compiled for: (the CPU's flag, the compiler's).
ISA = (("avx512f", "-mavx512f"), ("avx512bw", "-mavx512bw"), ("avx512vl", "-mavx512vl"),
       ("avx512_vnni", "-mavx512vnni"), ("f16c", "-mf16c"), ("fma", "-mfma"))
#: The C++ kernel (engine/nn/kernels/q8_0_linear.cpp); ``AUDIOCPP_Q8_0_KERNEL=0`` turns it off.
KERNEL = jit.Kernel("q8_0_linear", "q8_0_linear.cpp", ("pack_q8_into", "pack_q4_into", "block_linear"), ISA,
                    switch="AUDIOCPP_Q8_0_KERNEL")


@cache
def kernel() -> Any | None:
    """The compiled ops (``pack_q8_into``, ``pack_q4_into``, ``block_linear``), or None where they
    cannot be built or run (checked against :func:`reference` once, both layouts; ``jit.why_not``
    says why). ``AUDIOCPP_Q8_0_KERNEL=0`` disables them."""
    module = jit.build(KERNEL)
    if module is None:
        return None
    gen = torch.Generator().manual_seed(0)
    scales = (torch.rand(80, 3, generator=gen) * 0.01).to(torch.float16).float()
    x = torch.randn(6, 96, generator=gen)  # a tile of 4 rows + a tail of 2
    for low, high in ((-127, 128), (-8, 8)):  # Q8_0, Q4_0 values
        # 5 groups: 3 + a tail of 2
        values = torch.randint(low, high, (80, 96), dtype=torch.int8, generator=gen)
        packed = _pack_values(module, values, bits=8 if high > 8 else 4)
        got = module.block_linear(x, packed, _pack_scales(scales))
        if not torch.allclose(got.double(), reference(x, values, scales), rtol=1e-5, atol=1e-6):
            qtype = "Q8_0" if high > 8 else "Q4_0"
            jit.reject(KERNEL, f"the built kernel disagrees with its float64 reference ({qtype})")
            return None
    return module


def reference(x: torch.Tensor, values: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """What the kernel computes, in float64 from the same quantized input: ``x`` (M, K), the
    matrix's integer ``values`` (N, K) and float ``scales`` (N, K / 32)."""
    rows, cols = x.shape
    blocks = x.float().reshape(rows, cols // BLOCK, BLOCK)
    d = blocks.abs().amax(-1) / 127
    inverse = torch.where(d > 0, 1 / d, torch.zeros_like(d))
    qx = torch.round(blocks * inverse[..., None]).double()
    qw = values.reshape(values.shape[0], cols // BLOCK, BLOCK).double()
    sums = torch.einsum("mbk,nbk->mnb", qx, qw)
    return (sums * d.double()[:, None, :] * scales.double()[None, :, :]).sum(-1)


def _packed(rows: int, cols: int, bits: int) -> torch.Tensor:
    """An empty buffer in the kernel's layout for a ``(rows, cols)`` matrix of ``bits``-bit values."""
    return torch.empty((rows // GROUP, cols // BLOCK, 64 * bits), dtype=torch.uint8)


def _pack_stored(op: Any, stored: torch.Tensor, out: torch.Tensor) -> None:
    """Values as the formats store them, Q8_0's int8 or Q4_0's nibbles (uint8 0..15), into ``out``."""
    (op.pack_q8_into if stored.dtype == torch.int8 else op.pack_q4_into)(stored.contiguous(), out)


def _pack_values(op: Any, values: torch.Tensor, bits: int) -> torch.Tensor:
    """Integer values ``(rows, cols)`` (int8; Q4_0's -8..7 with ``bits=4``) in the kernel's layout."""
    stored = values.to(torch.int8) if bits == 8 else (values.to(torch.int16) + 8).to(torch.uint8)
    out = _packed(*values.shape, bits)
    _pack_stored(op, stored, out)
    return out


def _pack_scales(scales: torch.Tensor) -> torch.Tensor:
    rows, blocks = scales.shape
    # int16 bits of the f16 scales: no cast of the module's floating tensors can touch them
    return (scales.to(torch.float16).reshape(rows // GROUP, GROUP, blocks).transpose(1, 2).contiguous()
            .view(torch.int16))


def supports(blocks: BlockTensor) -> bool:
    """Whether ``blocks`` can take this layer here (the kernel builds; whole groups of 16 rows)."""
    return blocks.shape[0] % GROUP == 0 and kernel() is not None


class Q8_0Linear(nn.Module):
    """``y = x W^T + b`` with ``W`` a Q8_0 or Q4_0 matrix's values (8 or 4 bits resident, as stored)
    and block scales, computed by the VNNI kernel with int8 rows per block (CPU only; any float
    input, output in the input's dtype).

    ``packed`` and ``scales`` are non-persistent buffers (not the checkpoint's names); ``bias`` is
    an ordinary parameter, loaded by name."""

    def __init__(self, packed: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        groups, blocks, nbytes = packed.shape
        self.out_features, self.in_features = groups * GROUP, blocks * BLOCK
        self.bits = 8 if nbytes == 512 else 4
        self.register_buffer("packed", packed, persistent=False)
        self.register_buffer("scales", scales, persistent=False)
        self.bias = None if bias is None else nn.Parameter(bias, requires_grad=False)

    @classmethod
    def from_blocks(cls, blocks: BlockTensor) -> Q8_0Linear:
        op = _kernel_for(blocks.shape[0])
        rows, cols = blocks.shape
        q8 = blocks.qtype == "Q8_0"
        packed = _packed(rows, cols, 8 if q8 else 4)
        for lo in range(0, rows, _CHUNK_ROWS):
            chunk = blocks.row_slice(lo, lo + _CHUNK_ROWS)
            stored = chunk.q8() if q8 else chunk.nibbles()
            _pack_stored(op, torch.from_numpy(stored), packed[lo // GROUP:(lo + chunk.shape[0]) // GROUP])
        return cls(packed, _pack_scales(torch.from_numpy(blocks.scales())))

    @classmethod
    def from_values(cls, values: torch.Tensor, scales: torch.Tensor, bits: int = 8) -> Q8_0Linear:
        """The layer for integer ``values`` ``(out, in)`` (int8, or Q4_0's -8..7 with ``bits=4``)
        and block ``scales`` ``(out, in / 32)`` (rounded to f16, as the formats store them)."""
        return cls(_pack_values(_kernel_for(values.shape[0]), values, bits), _pack_scales(scales))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        y = kernel().block_linear(x.reshape(-1, self.in_features), self.packed, self.scales)
        if self.bias is not None:
            y += self.bias.float()
        return y.to(x.dtype).reshape(*lead, self.out_features)

    def values(self) -> torch.Tensor:
        """The matrix's integer values ``(out, in)`` as int8, unpacked."""
        groups, blocks, _ = self.packed.shape
        if self.bits == 8:
            steps = (self.packed ^ 0x80).view(torch.int8).view(groups, blocks, 8, GROUP, 4)
        else:
            pairs = self.packed.view(groups, blocks, 4, GROUP, 4)
            steps = (torch.cat([pairs & 15, pairs >> 4], dim=2).to(torch.int16) - 8).to(torch.int8)
        return steps.permute(0, 3, 1, 2, 4).reshape(self.out_features, self.in_features)

    def dequantized(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The weight matrix these values and block scales stand for."""
        scales = self.scales.view(torch.float16).transpose(1, 2).reshape(self.out_features, -1).float()
        w = self.values().float().view(self.out_features, -1, BLOCK) * scales[..., None]
        return w.view(self.out_features, self.in_features).to(dtype)

    def extra_repr(self) -> str:
        kind = "Q8_0" if self.bits == 8 else "Q4_0"
        return (f"in_features={self.in_features}, out_features={self.out_features}, {kind} blocks, "
                "int8 rows per block")


def _kernel_for(rows: int) -> Any:
    op = kernel()
    if op is None or rows % GROUP:
        raise ValueError("the Q8_0 kernel is not available here, or the rows are not in groups of 16")
    return op
