"""engine.nn.kernels.row_attention: the per-row decode attention of step_rows in one C++ call gives the
Python loop's outputs and cache writes bit for bit (float32 and bf16, GQA, rows at other lengths)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from audiocpp.engine.nn.kernels import jit
from audiocpp.engine.nn.kernels.row_attention import KERNEL, kernel
from audiocpp.engine.nn.layers.decoder import DecoderCache, DecoderConfig, DecoderStack

pytestmark = pytest.mark.skipif(KERNEL.off() or jit.toolchain_missing() is not None,
                                reason="the row-attention kernel cannot be built here (no compiler)")


def test_the_kernel_builds_here() -> None:
    assert kernel() is not None, jit.why_not(KERNEL)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("n_head,n_kv", [(8, 2), (4, 4), (16, 8)])
def test_equals_the_python_loop(dtype: torch.dtype, n_head: int, n_kv: int) -> None:
    cfg = DecoderConfig(dim=n_head * 32, n_head=n_head, n_kv_head=n_kv, head_dim=32, intermediate_size=8)
    stack = DecoderStack(nn.ModuleList(), cfg, max_positions=512)
    slots = [0, 5, 130, 299, 64]
    source = torch.Generator().manual_seed(n_head + n_kv)
    q, k, v = (torch.randn(len(slots), h, 1, 32, generator=source).to(dtype) for h in (n_head, n_kv, n_kv))

    def caches() -> list[DecoderCache]:
        out = []
        for slot in slots:
            cache = DecoderCache(3, cfg, 1, 300, dtype=dtype, device=torch.device("cpu"))
            fill = torch.Generator().manual_seed(slot)
            cache.keys.copy_(torch.randn(cache.keys.shape, generator=fill))
            cache.values.copy_(torch.randn(cache.values.shape, generator=fill))
            cache.mark(0, (torch.rand(1, slot + 1, generator=fill) < 0.9).long())
            cache.mark(slot, torch.ones(1, 1))  # the slot a step writes is valid (step_rows marks it)
            out.append(cache)
        return out

    mine, theirs = caches(), caches()
    got = kernel()(q, k, v, [c.keys for c in mine], [c.values for c in mine], [c.mask_add for c in mine],
                   2, slots, stack.key_scale, n_kv, n_head // n_kv)
    want = torch.cat([stack._attend(2, q[r:r + 1], k[r:r + 1], v[r:r + 1], None, cache, slot)
                      for r, (cache, slot) in enumerate(zip(theirs, slots))])
    assert torch.equal(got, want)
    assert all(torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values) for a, b in zip(mine, theirs))
