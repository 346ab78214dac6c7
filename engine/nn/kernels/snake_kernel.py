"""Snake in one pass over channels-last activations (CPU, every ISA level), bit for bit torch's.

``dac.snake_channels_last`` is five elementwise passes (``alpha * x``, ``sin``, square, times
``1 / (alpha + 1e-9)``, plus ``x``) and, before a conv with 16-bit weights, a sixth that rounds
to bfloat16. The kernel (``engine/nn/kernels/snake.cpp``) applies the same operations to each
element in the same order, with the sine torch.sin uses on contiguous float32 tensors
(MKL's ``vsSin`` where torch has MKL, torch.sin itself elsewhere), over tiles that stay in cache, and writes
float32 or the bfloat16 rounding directly. Its check at load compares it bit for bit with the torch
passes; where it differs, cannot be built or is turned off (``AUDIOCPP_SNAKE_KERNEL=0``), callers
keep the passes.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import torch

from . import jit

#: The C++ kernel (engine/nn/kernels/snake.cpp), one source for AVX-512, AVX2, NEON and portable
#: C++; ``AUDIOCPP_SNAKE_KERNEL=0`` turns it off.
KERNEL = jit.Kernel("snake", "snake.cpp", ("snake_channels_last", "snake_channels_last_portable", "variant"),
                    (jit.AVX512, jit.AVX2, jit.NEON, jit.GENERIC), switch="AUDIOCPP_SNAKE_KERNEL")


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
    """The compiled op ``snake_channels_last(x, alpha, inverse, bf16_out)`` of the variant this
    process runs, or None where it cannot be built or run, or does not give torch's numbers here
    (``jit.why_not`` says why)."""
    module = jit.build_checked(KERNEL, _problem)
    return None if module is None else module.snake_channels_last


@cache
def kernel_at(level: str) -> Any | None:
    """The compiled module of the variant a CPU of ``level`` runs (tests, benchmarks), checked;
    None where this CPU cannot run it."""
    return jit.build_checked(KERNEL, _problem, level=level)


def _problem(module: Any) -> str | None:
    generator = torch.Generator().manual_seed(0)
    for channels in (19, 64):  # a partial vector of channels, and whole ones
        x = torch.randn(301, channels, generator=generator) * torch.logspace(-2, 4, channels)
        alpha = torch.rand(channels, generator=generator) * 2 + 0.05
        want = snake_passes(x, alpha)
        inverse = (alpha + 1e-9).reciprocal()
        for op in (module.snake_channels_last, module.snake_channels_last_portable):
            if not (torch.equal(op(x, alpha, inverse, False), want)
                    and torch.equal(op(x, alpha, inverse, True), want.to(torch.bfloat16))):
                return "the built kernel's numbers are not torch's (its sine is not torch.sin's here)"
    return None


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
