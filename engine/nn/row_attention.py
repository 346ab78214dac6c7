"""A continuous batch's decode-step attention in one C++ call, bit for bit the Python loop's.

``DecoderStack.step_rows`` attends row by row, each row over its own KV cache (rows of other
lengths cannot share a matmul without changing its sums). That loop is about twenty small ATen
calls per row and layer, mostly Python's dispatch at eight rows. ``engine/nn/kernels/row_attention.cpp``
makes the same calls with the same arguments from C++ (so the same kernels and the same bits);
it is checked against the loop at load, and where it cannot be built, disagrees or is turned off
(``AUDIOCPP_ROW_ATTENTION=0``), the stack keeps the loop.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import torch

from . import jit

KERNEL = jit.Kernel("row_attention", "row_attention.cpp", ("attend_rows",), (),
                    switch="AUDIOCPP_ROW_ATTENTION")


@cache
def kernel() -> Any | None:
    """The compiled ``attend_rows``, or None where it cannot be built or does not give the loop's
    bits here (``jit.why_not`` says why)."""
    module = jit.build(KERNEL)
    if module is None:
        return None
    if not _agrees(module.attend_rows):
        jit.reject(KERNEL, "the built kernel's attention differs from the Python loop's here")
        return None
    return module.attend_rows


def _agrees(op: Callable[..., torch.Tensor]) -> bool:
    """Whether ``op`` gives ``DecoderStack``'s row loop's outputs and caches, bit for bit."""
    from .decoder import DecoderCache, DecoderConfig, DecoderStack

    cfg = DecoderConfig(dim=64, n_head=4, n_kv_head=2, head_dim=16, intermediate_size=8)
    stack = DecoderStack(torch.nn.ModuleList(), cfg, max_positions=64)
    source = torch.Generator().manual_seed(0)
    slots = [3, 17, 39]

    def caches(dtype: torch.dtype) -> list[DecoderCache]:
        out = []
        for slot in slots:
            cache = DecoderCache(2, cfg, 1, 40, dtype=dtype, device=torch.device("cpu"))
            fill = torch.Generator().manual_seed(slot)
            cache.keys.copy_(torch.randn(cache.keys.shape, generator=fill))
            cache.values.copy_(torch.randn(cache.values.shape, generator=fill))
            cache.mark(0, torch.ones(1, slot + 1))
            out.append(cache)
        return out

    for dtype in (torch.float32, torch.bfloat16):
        q, k, v = (torch.randn(len(slots), h, 1, 16, generator=source).to(dtype) for h in (4, 2, 2))
        mine, theirs = caches(dtype), caches(dtype)
        got = op(q, k, v, [c.keys for c in mine], [c.values for c in mine], [c.mask_add for c in mine], 1,
                 slots, stack.key_scale, 2, 2)
        want = torch.cat([stack._attend(1, q[r:r + 1], k[r:r + 1], v[r:r + 1], None, cache, slot)
                          for r, (cache, slot) in enumerate(zip(theirs, slots))])
        same = all(torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
                   for a, b in zip(mine, theirs))
        if not (torch.equal(got, want) and same):
            return False
    return True
