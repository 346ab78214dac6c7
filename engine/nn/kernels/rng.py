"""Draws from torch's CPU random stream without materialising the ones that are not kept.

Audio8's semantic draw takes ``torch.rand(1, vocab)`` per row (155,776 uniforms at 0.6B) and uses
about 4,100 of them: the rest only advance the generator. :func:`uniform_at` gives the values
``torch.rand(total, generator=g, dtype=dtype)`` has at ``positions`` and leaves ``g`` where that
call leaves it, bit for bit, by running torch's MT19937 (its state through ``get_state`` /
``set_state``) in a small C++ kernel (``engine/nn/kernels/mt19937.cpp``) that twists whole blocks
and tempers only the kept words: about 25x faster than the draw it replaces. It is checked against
``torch.rand`` at load; where it cannot be built, fails that check or is turned off
(``AUDIOCPP_RNG_KERNEL=0``), or for another generator or dtype, :func:`uniform_at` gives None and
callers draw with ``torch.rand``.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import torch

from . import jit

#: The C++ kernel (engine/nn/kernels/mt19937.cpp), one source for AVX-512, AVX2, NEON and portable
#: C++ (integer words: the same on every level); ``AUDIOCPP_RNG_KERNEL=0`` turns it off.
KERNEL = jit.Kernel("mt19937", "mt19937.cpp", ("uniform_at", "uniform_at_portable", "variant"),
                    (jit.AVX512, jit.AVX2, jit.NEON, jit.GENERIC), switch="AUDIOCPP_RNG_KERNEL")
#: The dtypes whose ``torch.rand`` draws one 32-bit word per value (float64 draws two).
DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _agrees(op: Any) -> bool:
    """Whether ``op`` gives torch.rand's values and leaves the generator where it does."""
    for pre, total, dtype in ((0, 5000, torch.float32), (623, 1300, torch.float32),
                              (7, 70000, torch.bfloat16), (1, 4000, torch.float16), (5, 0, torch.float32)):
        generator = torch.Generator().manual_seed(pre + total)
        torch.rand(pre, generator=generator)
        mirror = torch.Generator()
        mirror.set_state(generator.get_state())
        want = torch.rand(total, generator=generator, dtype=dtype)
        positions = torch.arange(0, total, 3)
        values, state = op(mirror.get_state(), total, positions)
        mirror.set_state(state)
        if not torch.equal(_rounded(values, dtype), want[positions]) \
                or not torch.equal(torch.rand(700, generator=mirror), torch.rand(700, generator=generator)):
            return False
    return True


@cache
def kernel() -> Any | None:
    """The compiled op ``uniform_at(state, total, positions) -> (values, state)`` of the variant this
    process runs, or None where it cannot be built or run, or does not reproduce torch.rand here
    (``jit.why_not`` says why)."""
    module = jit.build_checked(KERNEL, _problem)
    return None if module is None else module.uniform_at


@cache
def kernel_at(level: str) -> Any | None:
    """The compiled module of the variant a CPU of ``level`` runs (tests, benchmarks), checked;
    None where this CPU cannot run it."""
    return jit.build_checked(KERNEL, _problem, level=level)


def _problem(module: Any) -> str | None:
    if not (_agrees(module.uniform_at) and _agrees(module.uniform_at_portable)):
        return "the built kernel does not reproduce torch.rand's stream here"
    return None


def _rounded(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """torch.rand's 16-bit values: the float32 uniform rounded, and 0 where that rounds to 1."""
    if dtype == torch.float32:
        return values
    values = values.to(dtype)
    return values.masked_fill(values == 1, 0)


def can_draw(generator: torch.Generator | None, dtype: torch.dtype) -> bool:
    """Whether :func:`uniform_at` can draw from ``generator`` in ``dtype`` here."""
    generator = torch.default_generator if generator is None else generator
    return generator.device.type == "cpu" and dtype in DTYPES and kernel() is not None


def uniform_at(generator: torch.Generator | None, total: int, positions: torch.Tensor,
               dtype: torch.dtype) -> torch.Tensor | None:
    """``torch.rand(total, generator=generator, dtype=dtype)[positions]`` (``positions`` increasing
    int64), with ``generator`` (None: torch's default CPU generator) advanced past all ``total``
    draws; None where this cannot be done here (then nothing was drawn)."""
    generator = torch.default_generator if generator is None else generator
    if generator.device.type != "cpu" or dtype not in DTYPES:
        return None
    op = kernel()
    if op is None:
        return None
    values, state = op(generator.get_state(), int(total), positions)
    generator.set_state(state)
    return _rounded(values, dtype)
