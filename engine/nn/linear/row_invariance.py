"""Whether torch's matrix product gives a row the same bits wherever it sits in the product.

Packing a request's rows without padding, or several requests' rows into one product, is exact only
where the GEMM computes every row the same way whatever the product's other rows: true of our block
kernels (``engine.nn.linear.q8_0_linear``, ``bf16_linear``: each output is one fixed sequence of operations),
and of MKL's float32 GEMM for most shapes, but not for all: held to AVX2, MKL computes a 64 -> 64
product of 300 rows otherwise than the first 300 rows of a 350-row one (its small-matrix path). So a
family that relies on it asks :func:`same_rows` for the shapes, row counts and positions it is about
to use: one pair of products on random values per question (the bits depend on the code path, which
is fixed by the shapes and positions, not on the values), the answer kept for the process.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

import torch
import torch.nn.functional as F

#: (rows of product A, row in A, row in product B, count): rows that must come out the same.
Parts = tuple[tuple[int, int, int, int], ...]


@lru_cache(maxsize=8192)
def same_rows(out_features: int, in_features: int, dtype: torch.dtype, rows_b: int, parts: Parts) -> bool:
    """Whether ``F.linear`` with an ``(out, in)`` weight of ``dtype`` on the CPU gives, for every
    ``(rows_a, a, b, n)`` of ``parts``, rows ``a .. a + n`` of an ``rows_a``-row product the bits of
    rows ``b .. b + n`` of one ``rows_b``-row product holding the same values there."""
    gen = torch.Generator().manual_seed(rows_b * 7919 + len(parts))
    weight = torch.randn(out_features, in_features, generator=gen).to(dtype)
    xb = torch.randn(rows_b, in_features, generator=gen).to(dtype)
    with torch.inference_mode():
        yb = F.linear(xb, weight)
        for rows_a, a, b, n in parts:
            xa = torch.randn(rows_a, in_features, generator=gen).to(dtype)
            xa[a:a + n] = xb[b:b + n]
            if not torch.equal(F.linear(xa, weight)[a:a + n], yb[b:b + n]):
                return False
    return True


def torch_gemm_shapes(module: torch.nn.Module) -> tuple[tuple[int, int, torch.dtype], ...]:
    """The distinct ``(out, in, dtype)`` of the plain ``nn.Linear`` layers under ``module`` on the CPU
    (torch's GEMM; block-quantized and bf16-weight layers are row-invariant by construction)."""
    shapes = {(m.out_features, m.in_features, m.weight.dtype) for m in module.modules()
              if type(m) is torch.nn.Linear and m.weight.device.type == "cpu"}
    return tuple(sorted(shapes, key=str))


def all_same_rows(shapes: Iterable[tuple[int, int, torch.dtype]], rows_b: int, parts: Iterable) -> bool:
    """:func:`same_rows` for every shape of ``shapes`` (True for none)."""
    parts = tuple(tuple(p) for p in parts)
    return all(same_rows(out, inp, dtype, rows_b, parts) for out, inp, dtype in shapes)
