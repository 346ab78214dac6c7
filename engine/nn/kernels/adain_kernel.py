"""AdaIN followed by Snake or a leaky ReLU, in one C++ pass per channel (``kernels/adain_act.cpp``), for
iSTFTNet decoders: Kokoro's ``AdaINResBlock1`` (Snake) and ``AdainResBlk1d`` (leaky ReLU).

``(1 + gamma) * instance_norm(x) + beta`` then the activation, as the torch modules compute them in nine
elementwise passes; the kernel folds the norm and the modulation into one affine map per channel (its
statistics in double precision) and applies it with the activation in the same pass, with a polynomial
sine. The result differs from the torch passes by float rounding only (the relative error of the kernel's
sine is below 2e-7; every level gives the portable build's bits:
tests/kernels/test_adain_kernel.py). Where the kernel cannot
be built or is turned off (``AUDIOCPP_ADAIN_KERNEL=0``), callers keep the torch passes.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import torch

from . import jit

KERNEL = jit.Kernel("adain_act", "adain_act.cpp", ("adain_act", "variant"),
                    (jit.AVX512, jit.AVX2, jit.NEON, jit.GENERIC), switch="AUDIOCPP_ADAIN_KERNEL")

SNAKE, LEAKY = 0, 1


def adain_act_passes(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, gamma: torch.Tensor,
                     beta: torch.Tensor, alpha: torch.Tensor | None, eps: float, slope: float,
                     kind: int) -> torch.Tensor:
    """The torch passes the kernel replaces (Kokoro's module arithmetic): ``x [B, C, T]``, ``gamma``,
    ``beta`` ``[B, C]``."""
    import torch.nn.functional as F

    z = F.instance_norm(x, weight=weight, bias=bias, eps=eps)
    z = (1 + gamma[:, :, None]) * z + beta[:, :, None]
    if kind == SNAKE:
        assert alpha is not None
        a = alpha.reshape(1, -1, 1)
        return z + (1 / a) * (torch.sin(a * z) ** 2)
    return F.leaky_relu(z, slope)


@cache
def kernel() -> Any | None:
    """The compiled ``adain_act(x, weight, bias, gamma, beta, alpha, eps, slope, kind)`` of the variant this
    process runs, or None where it cannot be built or does not agree with the portable build here."""
    module = jit.build_checked(KERNEL, _problem)
    return None if module is None else module.adain_act


@cache
def kernel_at(level: str) -> Any | None:
    return jit.build_checked(KERNEL, _problem, level=level)


def _problem(module: Any) -> str | None:
    generator = torch.Generator().manual_seed(0)
    for channels, frames in ((3, 37), (16, 1000)):
        x = torch.randn(2, channels, frames, generator=generator) * 3 + 1
        w, b = torch.rand(channels, generator=generator) + 0.5, torch.randn(channels, generator=generator)
        g, be = torch.randn(2, channels, generator=generator), torch.randn(2, channels, generator=generator)
        alpha = torch.rand(channels, generator=generator) * 4 + 0.1
        for kind in (SNAKE, LEAKY):
            got = module.adain_act(x, w, b, g, be, alpha, 1e-5, 0.2, kind)
            want = adain_act_passes(x, w, b, g, be, alpha, 1e-5, 0.2, kind)
            if not torch.allclose(got, want, rtol=1e-4, atol=1e-4 * float(want.abs().max())):
                return "the built kernel's numbers are not the torch passes' (to float rounding)"
    return None


def adain_act(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, gamma: torch.Tensor,
              beta: torch.Tensor, alpha: torch.Tensor | None, eps: float, slope: float,
              kind: int) -> torch.Tensor | None:
    """The kernel's result, or None where it does not apply (not float32 CPU, no kernel)."""
    if x.device.type != "cpu" or x.dtype != torch.float32 or x.dim() != 3 or x.shape[-1] == 0:
        return None
    op = kernel()
    if op is None:
        return None
    empty = alpha if alpha is not None else weight
    return op(x.contiguous(), weight, bias, gamma, beta, empty, eps, slope, kind)
