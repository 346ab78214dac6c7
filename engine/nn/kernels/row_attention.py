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

KERNEL = jit.Kernel("row_attention", "row_attention.cpp", ("attend_rows",), (jit.Variant("generic"),),
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


def attend_rows_python(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keys: list[torch.Tensor],
                       values: list[torch.Tensor], masks: list[torch.Tensor], layer: int, slots: list[int],
                       scale: float, n_kv: int, n_rep: int) -> torch.Tensor:
    """The loop the kernel runs, in Python (``DecoderStack``'s fallback): row ``r`` writes this
    step's keys (scaled by ``scale``) and values at slot ``slots[r]`` of layer ``layer`` of its cache
    ``keys[r]`` / ``values[r]`` (``[layers, 1, H_kv, S, D]``) and attends over its filled slots with
    its additive mask ``masks[r]`` (``[1, 1, 1, S]``), SDPA's math-backend arithmetic on grouped heads."""
    t, d = q.shape[2], q.shape[3]
    outs = []
    for r, slot in enumerate(slots):
        cached_keys, cached_values = keys[r][layer], values[r][layer]
        cached_keys[:, :, slot:slot + t] = k[r:r + 1].to(cached_keys.dtype) * scale
        cached_values[:, :, slot:slot + t] = v[r:r + 1]
        end = slot + t
        grouped = (q[r:r + 1] * scale).reshape(1, n_kv, n_rep * t, d)
        scores = grouped @ cached_keys[:, :, :end].transpose(-2, -1)
        scores.add_(masks[r][..., :end])
        outs.append((torch.softmax(scores, dim=-1) @ cached_values[:, :, :end]).view(1, q.shape[1], t, d))
    return torch.cat(outs)


def _agrees(op: Callable[..., torch.Tensor]) -> bool:
    """Whether ``op`` gives :func:`attend_rows_python`'s outputs and cache writes, bit for bit."""
    source = torch.Generator().manual_seed(0)
    slots = [3, 17, 39]
    for dtype in (torch.float32, torch.bfloat16):
        q, k, v = (torch.randn(len(slots), h, 1, 16, generator=source).to(dtype) for h in (4, 2, 2))
        caches = [torch.randn(2, 2, 1, 2, 40, 16, generator=source).to(dtype) for _ in slots]  # keys, values
        masks = [torch.zeros(1, 1, 1, 40, dtype=dtype) for _ in slots]
        for mask, slot in zip(masks, slots):
            mask[..., slot + 1:] = float("-inf")
        mine = [c.clone() for c in caches]
        got = op(q, k, v, [c[0] for c in mine], [c[1] for c in mine], masks, 1, slots, 0.42, 2, 2)
        want = attend_rows_python(q, k, v, [c[0] for c in caches], [c[1] for c in caches], masks, 1, slots,
                                  0.42, 2, 2)
        if not (torch.equal(got, want) and all(torch.equal(a, b) for a, b in zip(mine, caches))):
            return False
    return True
