"""Snake in one pass over channels-last activations (CPU, AVX-512), bit for bit torch's.

``dac.snake_channels_last`` is five elementwise passes (``alpha * x``, ``sin``, square, times
``1 / (alpha + 1e-9)``, plus ``x``) and, before a conv with 16-bit weights, a sixth that rounds
to bfloat16. The kernel (``engine/nn/kernels/snake.cpp``) applies the same operations to each
element in the same order, with the sine torch.sin uses on contiguous float32 tensors (MKL's
``vsSin``), over tiles that stay in cache, and writes float32 or the bfloat16 rounding directly.
Its check at load compares it bit for bit with the torch passes; where it differs (a torch without
MKL), cannot be built or is turned off (``AUDIOCPP_SNAKE_KERNEL=0``), callers keep the passes.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import torch

from . import jit

#: The instruction sets the kernel is compiled for: (the CPU's flag, the compiler's).
ISA = (("avx512f", "-mavx512f"),)
#: ``-ffp-contract=off``: the square's product and the sum stay two roundings, as in torch.
KERNEL = jit.Kernel("snake", "snake.cpp", ("snake_channels_last",), (jit.Variant("avx512", ISA),),
                    switch="AUDIOCPP_SNAKE_KERNEL")


def snake_passes(x: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """The torch passes the kernel reproduces: ``x [..., C]``, ``alpha`` ``C`` values."""
    alpha = alpha.reshape(-1)
    out = torch.mul(alpha, x)
    out.sin_()
    out.pow_(2)
    out.mul_((alpha + 1e-9).reciprocal())
    out.add_(x)
    return out


@cache
def kernel() -> Any | None:
    """The compiled op ``snake_channels_last(x, alpha, inverse, bf16_out)``, or None where it cannot
    be built or run, or does not give torch's numbers here (``jit.why_not`` says why)."""
    module = jit.build(KERNEL)
    if module is None:
        return None
    op = module.snake_channels_last
    generator = torch.Generator().manual_seed(0)
    for channels in (19, 64):  # a partial vector of channels, and whole ones
        x = torch.randn(301, channels, generator=generator) * torch.logspace(-2, 4, channels)
        alpha = torch.rand(channels, generator=generator) * 2 + 0.05
        want = snake_passes(x, alpha)
        got = op(x, alpha, (alpha + 1e-9).reciprocal(), False)
        got16 = op(x, alpha, (alpha + 1e-9).reciprocal(), True)
        if not (torch.equal(got, want) and torch.equal(got16, want.to(torch.bfloat16))):
            jit.reject(KERNEL, "the built kernel's numbers are not torch's (torch.sin is not MKL's here)")
            return None
    return op


def snake_fused(x: torch.Tensor, alpha: torch.Tensor, out_dtype: torch.dtype | None) -> torch.Tensor | None:
    """Snake of ``x`` ``[..., C]`` (float32, contiguous, on the CPU) rounded to ``out_dtype``
    (float32 or bfloat16; None: float32) by the kernel, or None where it does not apply."""
    if x.device.type != "cpu" or x.dtype != torch.float32 or alpha.dtype != torch.float32 \
            or out_dtype not in (None, torch.float32, torch.bfloat16) or not x.is_contiguous() \
            or x.dim() == 0 or x.shape[-1] != alpha.numel() or torch.is_grad_enabled() and x.requires_grad:
        return None
    op = kernel()
    if op is None:
        return None
    alpha = alpha.reshape(-1)
    return op(x, alpha, (alpha + 1e-9).reciprocal(), out_dtype == torch.bfloat16)
