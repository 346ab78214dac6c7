"""Linear layers that compute with a Q8_0 (or Q4_0) matrix's own blocks on the CPU, on every ISA.

Q8_0 stores a matrix as blocks of 32 int8 values along a row with one f16 scale each. This layer
keeps exactly those values and scales resident (34 bytes per 32 weights, as in the file) and
computes as ggml does: each row of the input is quantized per block of 32 to int8 with one float32
scale (``d = max|x| / 127``, values rounded half to even, at most 127 in magnitude), the int8 dot
product of each pair of blocks is summed exactly in int32, and the block sums are accumulated in
float32 weighted by the two scales, one fused multiply-add per block in block order::

    y[m, n] = fma(isum[m, n, b], dw[n, b] * dx[m, b], y[m, n])    for b = 0, 1, ...

Every ISA level computes the same integer sums (``vpdpbusd`` on AVX-512 and AVX-VNNI,
``vpmaddubsw`` on AVX2, ``sdot`` or widening multiplies on NEON, plain C++ in the portable code)
and this same float sequence, so a package gives the same numbers on an AVX2 laptop, an AVX-512
server and an ARM board: the kernel checks its vector code against its portable code at load.

Scaling each block of the input on its own keeps the error of outlier channels to their own
blocks: about 0.5 % relative output error per layer against the Q8_0 matrix in float (the error
of Q8_0 itself is another 0.5 %; the per-row int8 layer it replaces was at 1.0 %), and it runs
1.5-3x faster than the oneDNN bfloat16 GEMM from one row to hundreds on AVX-512
(``tools/bench_kernels.py``, docs/numerics.md). A NaN or infinite input makes its row's outputs
NaN, as float math would. Q4_0 matrices run the same way with their 4-bit values (value = nibble
- 8) kept 4-bit.

The kernel (``engine/nn/kernels/q8_0_linear.cpp``) is compiled on first use for the level this
process runs (``engine.nn.kernels.jit``; ``audiocpp kernels`` at set-up); off the CPU, without a compiler,
or with ``AUDIOCPP_Q8_0_KERNEL=0``, quantized matrices take ``engine.nn.linear.quantized``'s int4 or int8
layers instead (``engine.nn.linear.choice`` picks).

Layout, packed at load straight from the file's blocks: output features in groups of 16; for each
group and block of 32 inputs, Q8_0: 512 bytes, 8 steps of (16 features x 4 consecutive inputs) of
the stored int8 values; Q4_0: 256 bytes, 4 steps whose bytes hold step ``s`` in the low nibble and
``s + 4`` in the high one (the file's own nibble pairs). Then the scales as f16 ``(groups, blocks,
16)``, held as their int16 bits so that no dtype cast of the module alters them.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np
import torch
from torch import nn

from ...weights.blocks import BLOCK, BlockTensor
from ..kernels import jit
from . import pack_cache

#: Output features per group of the packed layout (one AVX-512 register of int32 sums).
GROUP = 16

#: The C++ kernel (engine/nn/kernels/q8_0_linear.cpp), one source for every level: AVX-512 VNNI,
#: AVX-VNNI, AVX2 (vpmaddubsw), NEON with and without sdot, and the portable C++ that all equal bit
#: for bit. ``AUDIOCPP_Q8_0_KERNEL=0`` turns it off.
KERNEL = jit.Kernel("q8_0_linear", "q8_0_linear.cpp",
                    ("pack_blocks_into", "block_linear", "block_linear_portable", "block_linears", "variant",
                     "q8_stored_offset"),
                    jit.ALL_LEVELS, switch="AUDIOCPP_Q8_0_KERNEL")


@cache
def kernel() -> Any | None:
    """The compiled ops (``pack_blocks_into``, ``block_linear``, ``block_linear_portable``,
    ``block_linears``, ``variant``) of the variant this process runs, or None where they cannot be
    built or run (checked against :func:`reference` and the build's portable code once, both
    layouts; ``jit.why_not`` says why). ``AUDIOCPP_Q8_0_KERNEL=0`` disables them."""
    return jit.build_checked(KERNEL, _problem)


@cache
def kernel_at(level: str) -> Any | None:
    """The ops compiled as the variant a CPU of ``level`` runs (tests and benchmarks: any level this
    CPU runs), checked as :func:`kernel` is; None where this CPU cannot run it."""
    return jit.build_checked(KERNEL, _problem, level=level)


def _problem(module: Any) -> str | None:
    gen = torch.Generator().manual_seed(0)
    scales = (torch.rand(80, 3, generator=gen) * 0.01).to(torch.float16).float()
    x = torch.randn(6, 96, generator=gen)  # a tile of 4 rows + a tail of 2
    for low, high in ((-127, 128), (-8, 8)):  # Q8_0, Q4_0 values
        # 5 groups: 3 + a tail of 2
        values = torch.randint(low, high, (80, 96), dtype=torch.int8, generator=gen)
        packed, packed_scales = _pack(module, values, scales, bits=8 if high > 8 else 4)
        got = module.block_linear(x, packed, packed_scales)
        qtype = "Q8_0" if high > 8 else "Q4_0"
        if not torch.allclose(got.double(), reference(x, values, scales), rtol=1e-5, atol=1e-6):
            return f"the built kernel disagrees with its float64 reference ({qtype})"
        if not torch.equal(got, module.block_linear_portable(x, packed, packed_scales)):
            return f"the built kernel's vector code differs from its portable code ({qtype})"
    return None


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


def _packed_shapes(rows: int, cols: int, bits: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The shapes of the kernel's buffers for a ``(rows, cols)`` matrix of ``bits``-bit values
    (rows rounded up to whole groups): the values (uint8), and the scales as f16 bits (int16)."""
    groups = -(-rows // GROUP)
    return (groups, cols // BLOCK, 64 * bits), (groups, cols // BLOCK, GROUP)


def _packed(rows: int, cols: int, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Empty buffers in the kernel's layout (:func:`_packed_shapes`)."""
    values, scales = _packed_shapes(rows, cols, bits)
    return torch.empty(values, dtype=torch.uint8), torch.empty(scales, dtype=torch.int16)


def raw_blocks(values: torch.Tensor, scales: torch.Tensor, bits: int) -> np.ndarray:
    """The bytes a GGUF file stores for integer ``values`` ``(rows, cols)`` (int8; Q4_0's -8..7
    with ``bits=4``) and block ``scales`` ``(rows, cols / 32)`` (rounded to f16): Q8_0 blocks
    ``f16 d, int8 q[32]``, Q4_0 blocks ``f16 d, 16 bytes`` (value j low, value j + 16 high)."""
    rows, cols = values.shape
    d = scales.to(torch.float16).numpy().reshape(rows, cols // BLOCK, 1).view(np.uint8)
    v = values.numpy().astype(np.int16).reshape(rows, cols // BLOCK, BLOCK)
    if bits == 8:
        body = v.astype(np.int8).view(np.uint8)
    else:
        nibbles = (v + 8).astype(np.uint8)
        body = nibbles[:, :, :16] | (nibbles[:, :, 16:] << 4)
    return np.ascontiguousarray(np.concatenate([d, body], axis=2)).reshape(rows, -1)


def _pack_raw(op: Any, raw: np.ndarray, rows: int, cols: int, bits: int) -> tuple[torch.Tensor, ...]:
    """A GGUF tensor's block bytes (``rows`` x its row bytes) in the kernel's layout."""
    packed, scales = _packed(rows, cols, bits)
    op.pack_blocks_into(torch.from_numpy(raw).view(rows, -1), bits, packed, scales)
    return packed, scales


def _pack(op: Any, values: torch.Tensor, scales: torch.Tensor, bits: int) -> tuple[torch.Tensor, ...]:
    return _pack_raw(op, raw_blocks(values, scales, bits), *values.shape, bits)


@cache
def _layout(op: Any) -> str:
    """What the packed bytes depend on (the pack cache's key): the group width, the kernel's source
    and shared header, and the byte its build adds to stored Q8_0 values."""
    digest = hashlib.sha256(KERNEL.text().encode())
    digest.update((jit.KERNELS_DIR / "isa.h").read_bytes())
    return f"group{GROUP}-{digest.hexdigest()[:16]}-offset{int(op.q8_stored_offset())}"


def supports(blocks: BlockTensor) -> bool:
    """Whether ``blocks`` can take this layer here (the kernel builds)."""
    return kernel() is not None


class Q8_0Linear(nn.Module):
    """``y = x W^T + b`` with ``W`` a Q8_0 or Q4_0 matrix's values (8 or 4 bits resident, as stored)
    and block scales, computed by the block kernel with int8 rows per block (CPU only; any float
    input, output in the input's dtype).

    ``packed`` and ``scales`` are non-persistent buffers (not the checkpoint's names); ``bias`` is
    an ordinary parameter, loaded by name. ``out_features`` not a multiple of 16: the last group is
    padded with zero rows, whose outputs are dropped."""

    def __init__(self, packed: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None = None,
                 out_features: int | None = None) -> None:
        super().__init__()
        groups, blocks, nbytes = packed.shape
        self.out_features, self.in_features = out_features or groups * GROUP, blocks * BLOCK
        if not groups * GROUP - GROUP < self.out_features <= groups * GROUP:
            raise ValueError(f"{self.out_features} outputs do not fill {groups} groups of {GROUP}")
        self.bits = 8 if nbytes == 512 else 4
        self.register_buffer("packed", packed, persistent=False)
        self.register_buffer("scales", scales, persistent=False)
        self.bias = None if bias is None else nn.Parameter(bias, requires_grad=False)

    @classmethod
    def from_blocks(cls, blocks: BlockTensor) -> Q8_0Linear:
        """The layer for a stored Q8_0 / Q4_0 matrix, packed in one pass over its bytes (a view of
        the file: nothing is converted on the way), or mapped from the pack cache
        (``engine.nn.linear.pack_cache``) where an earlier process packed it."""
        rows, cols = blocks.shape
        bits = 8 if blocks.qtype == "Q8_0" else 4
        op = _kernel()
        cached = pack_cache.lookup(blocks, bits, _layout(op), _packed_shapes(rows, cols, bits))
        if cached is not None:
            return cls(*cached, out_features=rows)
        raw = blocks.data.reshape(rows, -1)
        if not raw.flags.writeable:  # torch wants a writable array; the kernel only reads it
            raw = raw.view()
            raw.flags.writeable = True
        packed, scales = _pack_raw(op, raw, rows, cols, bits)
        pack_cache.remember(blocks, bits, _layout(op), packed, scales)
        return cls(packed, scales, out_features=rows)

    @classmethod
    def from_values(cls, values: torch.Tensor, scales: torch.Tensor, bits: int = 8) -> Q8_0Linear:
        """The layer for integer ``values`` ``(out, in)`` (int8, or Q4_0's -8..7 with ``bits=4``)
        and block ``scales`` ``(out, in / 32)`` (rounded to f16, as the formats store them)."""
        return cls(*_pack(_kernel(), values, scales, bits), out_features=values.shape[0])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        return self._finish(kernel().block_linear(x.reshape(-1, self.in_features), self.packed, self.scales),
                            x.dtype, lead)

    def _finish(self, y: torch.Tensor, dtype: torch.dtype, lead: torch.Size) -> torch.Tensor:
        if y.shape[1] != self.out_features:  # a padded last group
            y = y[:, :self.out_features]
        if self.bias is not None:
            y += self.bias.float()
        return y.to(dtype).reshape(*lead, self.out_features)

    @staticmethod
    def shared_input(layers: Sequence[nn.Module], x: torch.Tensor) -> list[torch.Tensor] | None:
        """Each of ``layers`` applied to ``x`` (a block's q, k and v projections; gate and up), as
        one kernel call where all are :class:`Q8_0Linear` on the CPU: ``x`` quantized once, one pass
        of threads over every matrix; each output is its own layer's bit for bit. None where they
        are not (the caller applies them one by one)."""
        if len(layers) < 2 or not all(type(layer) is Q8_0Linear for layer in layers):
            return None
        lead = x.shape[:-1]
        rows = x.reshape(-1, x.shape[-1])
        ys = kernel().block_linears(rows, [m.packed for m in layers], [m.scales for m in layers])
        return [layer._finish(y, x.dtype, lead) for layer, y in zip(layers, ys)]

    def values(self) -> torch.Tensor:
        """The matrix's integer values ``(out, in)`` as int8, unpacked."""
        groups, blocks, _ = self.packed.shape
        if self.bits == 8:  # stored as the kernel's build keeps them (VNNI: q ^ 0x80)
            stored = self.packed ^ int(kernel().q8_stored_offset())
            steps = stored.view(torch.int8).view(groups, blocks, 8, GROUP, 4)
        else:
            pairs = self.packed.view(groups, blocks, 4, GROUP, 4)
            steps = (torch.cat([pairs & 15, pairs >> 4], dim=2).to(torch.int16) - 8).to(torch.int8)
        return steps.permute(0, 3, 1, 2, 4).reshape(groups * GROUP, self.in_features)[:self.out_features]

    def dequantized(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The weight matrix these values and block scales stand for."""
        groups = self.scales.shape[0]
        scales = self.scales.view(torch.float16).transpose(1, 2).reshape(groups * GROUP, -1)
        scales = scales[:self.out_features].float()
        w = self.values().float().view(self.out_features, -1, BLOCK) * scales[..., None]
        return w.view(self.out_features, self.in_features).to(dtype)

    def extra_repr(self) -> str:
        kind = "Q8_0" if self.bits == 8 else "Q4_0"
        return (f"in_features={self.in_features}, out_features={self.out_features}, {kind} blocks, "
                "int8 rows per block")


def _kernel() -> Any:
    op = kernel()
    if op is None:
        raise ValueError("the Q8_0 kernel is not available here")
    return op
