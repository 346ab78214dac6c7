"""Float32 linear layers over bfloat16-stored weights (CPU: AVX-512, AVX2, NEON, portable C++).

Checkpoints often store weights in bfloat16 and references upcast them to float32 before
computing in float32. The upcast is exact, so a kernel that keeps the weights in bfloat16 and
widens each one to float32 as it multiplies computes the same products, accumulated in float32
with FMA, while reading half the bytes: one-row decode steps, bound by reading the weights, run
up to twice as fast. Only the summation order differs from torch's GEMM (a relative difference of
about 1e-6, like ``packed_linear``).

The kernel is a small C++ extension (``engine/nn/kernels/bf16_linear.cpp``) compiled on first use
for the ISA level the process runs (``engine.nn.kernels.jit``; ``audiocpp kernels`` at set-up); every level
sums in the same order (16 running sums, reduced as AVX-512 reduces), so every CPU gives the same
bits. Where it cannot be built (no compiler) nothing is converted and callers keep their layers.
``engine.nn.linear.choice.fast_linears(module, bf16_weights=True)`` converts only ``nn.Linear`` whose float32
weights are exactly bfloat16 values (:func:`exactly_bf16`).

Used today by Audio8 TTS (its checkpoints are bfloat16); ``linear_for`` offers it to any family.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import torch
from torch import nn

from ..kernels import jit

#: The C++ kernel (engine/nn/kernels/bf16_linear.cpp), one source for AVX-512, AVX2, NEON and
#: portable C++, which all give the same bits; ``AUDIOCPP_BF16_LINEAR=0`` turns it off.
KERNEL = jit.Kernel("bf16_linear", "bf16_linear.cpp", ("linear_bf16w", "linear_bf16w_portable", "variant"),
                    (jit.AVX512, jit.AVX2, jit.NEON, jit.GENERIC), switch="AUDIOCPP_BF16_LINEAR")


@cache
def kernel() -> Any | None:
    """The compiled op ``linear_bf16w(x, w, bias)`` of the variant this process runs, or None where
    it cannot be built or run (``jit.why_not`` says why). ``AUDIOCPP_BF16_LINEAR=0`` disables it."""
    module = jit.build_checked(KERNEL, _problem)
    return None if module is None else module.linear_bf16w


@cache
def kernel_at(level: str) -> Any | None:
    """The compiled module of the variant a CPU of ``level`` runs (tests, benchmarks), checked;
    None where this CPU cannot run it."""
    return jit.build_checked(KERNEL, _problem, level=level)


def _problem(module: Any) -> str | None:
    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(5, 77, generator=gen), torch.randn(6, 77, generator=gen).to(torch.bfloat16)
    got = module.linear_bf16w(x, w, None)
    if not torch.allclose(got, x @ w.float().t(), atol=1e-4):
        return "the built kernel disagrees with torch's float32 linear"
    if not torch.equal(got, module.linear_bf16w_portable(x, w, None)):
        return "the built kernel's vector code differs from its portable code"
    return None


#: Above this many rows the weights are widened and torch's GEMM does the work.
KERNEL_MAX_ROWS = 1024


class BF16WeightLinear(nn.Module):
    """``y = x W^T + b`` in float32 with ``W`` held in bfloat16 (inference only); inputs of more
    than :data:`KERNEL_MAX_ROWS` rows widen ``W`` for the call and use torch's GEMM."""

    def __init__(self, linear: nn.Linear, op: Any) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight_bf16 = linear.weight.detach().to(torch.bfloat16).contiguous()
        self.bias = None if linear.bias is None else linear.bias.detach().to(torch.float32).clone()
        self._op = op

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        rows = x.reshape(-1, shape[-1])
        if rows.shape[0] > KERNEL_MAX_ROWS or x.dtype != torch.float32:
            return torch.nn.functional.linear(x, self.weight_bf16.to(x.dtype), self.bias)
        return self._op(rows, self.weight_bf16, self.bias).reshape(*shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, weights=bfloat16, "
                "compute=float32")


def exactly_bf16(weight: torch.Tensor) -> bool:
    return weight.dtype == torch.float32 and torch.equal(weight, weight.to(torch.bfloat16).to(torch.float32))
