"""A stack of Q8_0 pre-norm SwiGLU blocks in one C++ call, bit for bit its Python.

MiniCPM's block (VoxCPM's LocDiT at every Euler step, LocEnc at every patch, the LMs' prefill and
decode steps over their KV cache) is about 80 small ATen ops around seven Q8_0 products. At the
DiT's ten rows, dispatching those ops from Python took 2.1 of the 7.7 ms an estimator call takes on
an AVX2 VoxCPM-0.5B.
``engine/nn/kernels/q8_block.cpp`` runs the whole stack from C++ with the Q8_0 core's products, the
same ATen calls for the reductions, rsqrt, SiLU and attention, and the element-wise float32
arithmetic written out in the Python's order (each operation rounded once, as ATen's kernels round
it), so it gives the Python's bits; it is checked against :func:`reference_block` at load.

:func:`run_stack` takes it where every block is a plain HF-named ``DecoderLayer`` of Q8_0 / Q4_0
linears without biases or qk-norm, on float32 CPU input with float32 rotate-half RoPE tables (or
none), and answers None otherwise (another weight type, bfloat16 compute, the kernel not built or
turned off with ``AUDIOCPP_Q8_BLOCK=0``): the caller then runs its Python.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from functools import cache
from typing import Any

import torch
import torch.nn.functional as F

from . import jit, q8_0_linear
from .decoder import DecoderConfig, DecoderLayer
from .q8_0_linear import Q8_0Linear
from .rope import apply_rotary

#: The stack's kernel: the Q8_0 core included, so compiled per ISA level as that kernel is (the same
#: packed layout); ``AUDIOCPP_Q8_BLOCK=0`` turns it off.
KERNEL = jit.Kernel("q8_block", "q8_block.cpp", ("block_stack",), jit.ALL_LEVELS, switch="AUDIOCPP_Q8_BLOCK",
                    includes=("q8_0_linear.cpp",))

Rope = tuple[torch.Tensor, torch.Tensor]


@cache
def kernel() -> Any | None:
    """The compiled ``block_stack``, or None where the Q8_0 kernel is not here, this one cannot be
    built, or it does not give :func:`reference_block`'s bits (``jit.why_not`` says why)."""
    if q8_0_linear.kernel() is None:
        return None
    module = jit.build(KERNEL)
    if module is None:
        return None
    if not _agrees(module.block_stack):
        jit.reject(KERNEL, "the built kernel's blocks differ from their Python here")
        return None
    return module.block_stack


def reference_block(layer: DecoderLayer, x: torch.Tensor, rope: Rope | None, *, causal: bool,
                    residual_scale: float | None, cache: torch.Tensor | None = None, start: int = 0,
                    attend_cache: bool = False) -> torch.Tensor:
    """The Python the kernel replaces (MiniCPM's block, families/voxcpm2/model/minicpm.py): the block's
    output; with ``cache`` (this block's ``[2, B, kv_heads, S, head_dim]``) its keys (rotated) and
    values written at positions ``start ..`` and, with ``attend_cache``, attention over the cache's
    filled positions (a decode step) instead of this call's keys and values."""
    def add(residual: torch.Tensor, branch: torch.Tensor) -> torch.Tensor:
        return residual + branch if residual_scale is None else residual + branch * residual_scale

    n = layer.cfg.names
    attention = layer.attn
    q, k, v = (t.transpose(1, 2) for t in attention.project(layer.attention_input(x)))
    if rope is not None:
        q, k = (apply_rotary(t, *rope, compute_dtype=torch.float32) for t in (q, k))
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    if cache is not None:
        end = start + k.shape[2]
        cache[0, :, :, start:end] = k
        cache[1, :, :, start:end] = v
        if attend_cache:
            k, v = cache[0][:, :, :end], cache[1][:, :, :end]
    attn = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    b, _, t, _ = attn.shape
    h = add(x, attention.output(attn.transpose(1, 2).reshape(b, t, -1)))
    return add(h, getattr(layer, n.feed_forward)(getattr(layer, n.ffn_norm)(h)))


def run_stack(layers: Sequence[DecoderLayer], x: torch.Tensor, rope: Rope | None, *, causal: bool,
              residual_scale: float | None, cache: torch.Tensor | None = None, start: int = 0,
              attend_cache: bool = False) -> torch.Tensor | None:
    """``layers`` applied in turn to ``x`` ``[B, T, dim]`` as :func:`reference_block` applies each (block
    ``i`` with ``cache[i]`` of a ``[blocks, 2, B, kv_heads, S, head_dim]`` cache), in one kernel call;
    None where the kernel does not take this stack (see the module's docstring)."""
    if x.device.type != "cpu" or x.dtype != torch.float32 or x.dim() != 3 or not layers:
        return None
    if rope is not None and not all(t.dtype == torch.float32 and t.dim() == 2 for t in rope):
        return None
    if cache is not None and (cache.device.type != "cpu" or cache.dtype != torch.float32):
        return None
    weights = _stack_weights(layers)
    op = kernel() if weights is not None else None
    if op is None:
        return None
    cfg = layers[0].cfg
    cos, sin = (t.contiguous() for t in rope) if rope is not None else (None, None)
    return op(x.contiguous(), weights, cfg.n_head, cfg.n_kv_head, cfg.head_dim, cfg.norm_eps,
              1.0 if residual_scale is None else residual_scale, causal, cos, sin, cache, start, attend_cache)


#: Each stack's tensors for the kernel (or None: not a stack it takes), read once per container and
#: set of blocks: a block's linears and norms are not replaced after its model is loaded.
_STACKS: weakref.WeakKeyDictionary[Any, tuple[tuple[int, ...], list[torch.Tensor] | None]] = \
    weakref.WeakKeyDictionary()


def _stack_weights(layers: Sequence[DecoderLayer]) -> list[torch.Tensor] | None:
    """:func:`_weights` of ``layers``, remembered per container (a model's ``ModuleList``)."""
    blocks = tuple(id(layer) for layer in layers)
    try:
        known = _STACKS.get(layers)
    except TypeError:  # a container that cannot be weakly referenced: read it each time
        return _weights(layers)
    if known is None or known[0] != blocks:
        known = (blocks, _weights(layers))
        _STACKS[layers] = known
    return known[1]


def _takes(cfg: DecoderConfig) -> bool:
    return (len(cfg.names.qkv) == 3 and not (cfg.qkv_bias or cfg.o_bias or cfg.qk_norm)
            and cfg.rope_style == "rotate_half" and cfg.attention == "sdpa")


def _weights(layers: Sequence[DecoderLayer]) -> list[torch.Tensor] | None:
    """The kernel's 16 tensors per block (q8_block.cpp's ``Slot`` order), or None where a block is
    not one it takes."""
    cfg = layers[0].cfg
    weights: list[torch.Tensor] = []
    for layer in layers:
        if type(layer.cfg) is not DecoderConfig or layer.cfg != cfg or not _takes(cfg):
            return None
        n = cfg.names
        attention, feed_forward = layer.attn, getattr(layer, n.feed_forward)
        norms = (getattr(layer, n.attention_norm), getattr(layer, n.ffn_norm))
        linears = [getattr(attention, name) for name in (*n.qkv, n.out)] + \
                  [getattr(feed_forward, name) for name in n.mlp]
        if not all(type(m) is Q8_0Linear and m.bias is None and m.out_features == m.packed.shape[0] * 16
                   for m in linears):
            return None
        if not all(norm.weight.dtype == torch.float32 and norm.eps == cfg.norm_eps for norm in norms):
            return None
        q, k, v, o, gate, up, down = linears
        weights += [norms[0].weight, q.packed, q.scales, k.packed, k.scales, v.packed, v.scales, o.packed,
                    o.scales, norms[1].weight, gate.packed, gate.scales, up.packed, up.scales, down.packed,
                    down.scales]
    return weights


def _agrees(op: Any) -> bool:
    """Whether ``op`` gives :func:`reference_block`'s bits on a small random stack of two blocks of
    grouped heads: with RoPE, no causal mask and a residual scale over a sequence; then without
    RoPE or scale, causal, as a cache's prefill and one decode step (outputs and cache writes)."""
    gen = torch.Generator().manual_seed(0)
    cfg = DecoderConfig(dim=64, n_head=4, n_kv_head=2, head_dim=16, intermediate_size=96, norm_eps=1e-5)
    layers = [_random_layer(cfg, gen) for _ in range(2)]
    x = torch.randn(2, 6, 64, generator=gen)
    angles = torch.randn(5, 16, generator=gen)
    rope = (angles.cos(), angles.sin())
    weights = _weights(layers)
    sequence = want = x[:, :5].contiguous()
    for layer in layers:
        want = reference_block(layer, want, rope, causal=False, residual_scale=0.7)
    if not torch.equal(op(sequence, weights, 4, 2, 16, 1e-5, 0.7, False, *rope, None, 0, False), want):
        return False
    mine, theirs = torch.zeros(2, 2, 2, 2, 8, 16), torch.zeros(2, 2, 2, 2, 8, 16)
    for start, length, attend in ((0, 5, False), (5, 1, True)):
        part = x[:, start:start + length].contiguous()
        want = part
        for layer, layer_cache in zip(layers, theirs):
            want = reference_block(layer, want, None, causal=not attend, residual_scale=None,
                                   cache=layer_cache, start=start, attend_cache=attend)
        got = op(part, weights, 4, 2, 16, 1e-5, 1.0, not attend, None, None, mine, start, attend)
        if not (torch.equal(got, want) and torch.equal(mine, theirs)):
            return False
    return True


def _random_layer(cfg: DecoderConfig, gen: torch.Generator) -> DecoderLayer:
    """A block of random Q8_0 linears and norm weights."""
    layer = DecoderLayer(cfg)
    n = cfg.names
    for owner, names in ((layer.attn, (*n.qkv, n.out)), (getattr(layer, n.feed_forward), n.mlp)):
        for name in names:
            out_features, in_features = getattr(owner, name).weight.shape
            values = torch.randint(-127, 128, (out_features, in_features), dtype=torch.int8, generator=gen)
            scales = (torch.rand(out_features, in_features // 32, generator=gen) * 0.02).half().float()
            setattr(owner, name, Q8_0Linear.from_values(values, scales))
    for name in (n.attention_norm, n.ffn_norm):
        getattr(layer, name).weight.data = 1 + 0.1 * torch.randn(cfg.dim, generator=gen)
    return layer
