"""engine.nn.layers.q8_block: a stack of Q8_0 blocks in one C++ call gives the Python blocks' bits, over a
whole sequence (RoPE or none, causal or not, a residual scale or none, grouped heads, Q4_0 matrices)
and as a KV cache's prefill and decode steps (outputs and cache writes), and declines what it does
not compute."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from audiocpp.engine.nn.kernels import jit
from audiocpp.engine.nn.layers import q8_block
from audiocpp.engine.nn.layers.decoder import DecoderConfig, DecoderLayer
from audiocpp.engine.nn.linear.q8_0_linear import Q8_0Linear

pytestmark = pytest.mark.skipif(q8_block.KERNEL.off() or jit.toolchain_missing() is not None
                                or q8_block.KERNEL.unsupported() is not None,
                                reason="the Q8_0 block kernel cannot be built here")


def layers_of(cfg: DecoderConfig, count: int, seed: int, bits: int = 8) -> nn.ModuleList:
    gen = torch.Generator().manual_seed(seed)
    stack = nn.ModuleList(q8_block._random_layer(cfg, gen) for _ in range(count))
    if bits == 4:  # the same blocks with Q4_0 matrices
        n = cfg.names
        for layer in stack:
            for owner, names in ((layer.attn, (*n.qkv, n.out)), (getattr(layer, n.feed_forward), n.mlp)):
                for name in names:
                    rows, cols = getattr(owner, name).out_features, getattr(owner, name).in_features
                    values = torch.randint(-8, 8, (rows, cols), dtype=torch.int8, generator=gen)
                    scales = (torch.rand(rows, cols // 32, generator=gen) * 0.1).half().float()
                    setattr(owner, name, Q8_0Linear.from_values(values, scales, bits=4))
    return stack


def python_stack(layers: nn.ModuleList, x: torch.Tensor, rope, causal: bool, scale: float | None,
                 caches: tuple = (), starts: tuple = (), attend: bool = False) -> torch.Tensor:
    h = x
    for i, layer in enumerate(layers):
        h = q8_block.reference_block(layer, h, rope, causal=causal, residual_scale=scale,
                                     caches=[c[i] for c in caches], starts=starts, attend_cache=attend)
    return h


def rope_of(length: int, head_dim: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    angles = torch.randn(length, head_dim, generator=torch.Generator().manual_seed(seed))
    return angles.cos(), angles.sin()


def test_the_kernel_builds_here() -> None:
    assert q8_block.kernel() is not None, jit.why_not(q8_block.KERNEL)


@pytest.mark.parametrize("n_head,n_kv,rows,length", [(4, 2, 2, 5), (4, 4, 1, 1), (8, 2, 3, 9)])
@pytest.mark.parametrize("rope,causal,scale", [(True, False, 1.4 / 24 ** 0.5), (True, True, None),
                                               (False, False, None)])
@pytest.mark.parametrize("bits", [8, 4])
def test_equals_the_python_blocks(n_head: int, n_kv: int, rows: int, length: int, rope: bool, causal: bool,
                                  scale: float | None, bits: int) -> None:
    cfg = DecoderConfig(dim=64, n_head=n_head, n_kv_head=n_kv, head_dim=16, intermediate_size=96,
                        norm_eps=1e-5)
    layers = layers_of(cfg, 3, seed=n_head + length, bits=bits)
    x = torch.randn(rows, length, 64, generator=torch.Generator().manual_seed(length))
    table = rope_of(length, 16, seed=rows) if rope else None
    got = q8_block.run_stack(layers, x, table, causal=causal, residual_scale=scale)
    assert got is not None and torch.equal(got, python_stack(layers, x, table, causal, scale))


@pytest.mark.parametrize("rows,scale", [(1, None), (2, 0.3)])
def test_prefill_and_decode_steps_over_a_cache_equal_the_python(rows: int, scale: float | None) -> None:
    cfg = DecoderConfig(dim=64, n_head=8, n_kv_head=2, head_dim=16, intermediate_size=96, norm_eps=1e-6)
    layers = layers_of(cfg, 3, seed=rows)
    source = torch.Generator().manual_seed(7)
    x = torch.randn(rows, 9, 64, generator=source)
    cos, sin = rope_of(9, 16, seed=8)
    mine, theirs = (torch.zeros(3, 2, rows, 2, 12, 16) for _ in range(2))
    for start, length, attend in ((0, 6, False), (6, 1, True), (7, 1, True), (8, 1, True)):
        end = start + length
        part, table = x[:, start:end].contiguous(), (cos[start:end], sin[start:end])
        got = q8_block.run_stack(layers, part, table, causal=not attend, residual_scale=scale, caches=[mine],
                                 starts=[start], attend_cache=attend)
        want = python_stack(layers, part, table, not attend, scale, [theirs], [start], attend)
        assert got is not None and torch.equal(got, want)
        assert torch.equal(mine, theirs)
    assert mine[:, :, :, :, 9:].abs().sum() == 0  # nothing written past the last step


def test_rows_at_other_positions_of_their_own_caches_equal_the_python() -> None:
    """A continuous batch's decode step: each row writes and attends over its own cache, at its own
    position, with its own RoPE table."""
    cfg = DecoderConfig(dim=64, n_head=4, n_kv_head=2, head_dim=16, intermediate_size=96)
    layers = layers_of(cfg, 2, seed=9)
    source = torch.Generator().manual_seed(10)
    lengths = [4, 1, 7]
    mine = [torch.zeros(2, 2, 1, 2, 10, 16) for _ in lengths]
    for cache, length in zip(mine, lengths):  # each row's prefill
        prompt = torch.randn(1, length, 64, generator=source)
        assert q8_block.run_stack(layers, prompt, None, causal=True, residual_scale=None, caches=[cache],
                                  starts=[0]) is not None
    theirs = [cache.clone() for cache in mine]
    for step in range(2):
        x = torch.randn(len(lengths), 1, 64, generator=source)
        positions = [length + step for length in lengths]
        angles = torch.randn(len(lengths), 1, 16, generator=source)
        table = (angles.cos(), angles.sin())
        got = q8_block.run_stack(layers, x, table, causal=False, residual_scale=0.5, caches=mine,
                                 starts=positions, attend_cache=True)
        want = python_stack(layers, x, table, False, 0.5, theirs, positions, True)
        assert got is not None and torch.equal(got, want)
        assert all(torch.equal(a, b) for a, b in zip(mine, theirs))


def test_declines_what_it_does_not_compute() -> None:
    cfg = DecoderConfig(dim=64, n_head=4, n_kv_head=2, head_dim=16, intermediate_size=96)
    layers = layers_of(cfg, 2, seed=1)
    x = torch.randn(1, 3, 64)
    assert q8_block.run_stack(layers, x.bfloat16(), None, causal=True, residual_scale=None) is None
    assert q8_block.run_stack(layers, x, tuple(t.double() for t in rope_of(3, 16, 0)), causal=True,
                              residual_scale=None) is None
    plain = nn.ModuleList([DecoderLayer(cfg)])  # float linears
    assert q8_block.run_stack(plain, x, None, causal=True, residual_scale=None) is None
    normed = DecoderConfig(dim=64, n_head=4, n_kv_head=2, head_dim=16, intermediate_size=96, qk_norm=True)
    assert q8_block.run_stack(layers_of(normed, 1, seed=2), x, None, causal=True, residual_scale=None) is None


def test_a_replaced_block_is_read_again() -> None:
    cfg = DecoderConfig(dim=64, n_head=4, n_kv_head=2, head_dim=16, intermediate_size=96)
    layers = layers_of(cfg, 2, seed=3)
    x = torch.randn(1, 4, 64)
    first = q8_block.run_stack(layers, x, None, causal=False, residual_scale=None)
    layers[1] = layers_of(cfg, 1, seed=4)[0]
    again = q8_block.run_stack(layers, x, None, causal=False, residual_scale=None)
    assert first is not None and again is not None
    assert torch.equal(again, python_stack(layers, x, None, False, None))
    assert not torch.equal(again, first)
