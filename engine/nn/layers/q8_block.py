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

import functools
import weakref
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from ..kernels import jit
from ..linear import q8_0_linear
from ..linear.q8_0_linear import Q8_0Linear
from .decoder import DecoderConfig, DecoderLayer
from .rope import apply_rotary

#: The stack's kernel: the Q8_0 core included, so compiled per ISA level as that kernel is (the same
#: packed layout); ``AUDIOCPP_Q8_BLOCK=0`` turns it off.
KERNEL = jit.Kernel("q8_block", "q8_block.cpp", ("block_stack",), jit.ALL_LEVELS, switch="AUDIOCPP_Q8_BLOCK",
                    includes=("q8_0_linear.cpp",))

Rope = tuple[torch.Tensor, torch.Tensor]


@functools.cache
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
                    residual_scale: float | None, caches: Sequence[torch.Tensor] = (),
                    starts: Sequence[int] = (), attend_cache: bool = False) -> torch.Tensor:
    """The Python the kernel replaces (MiniCPM's block, families/voxcpm2/model/minicpm.py): the block's
    output. ``rope``: cos / sin ``[T, head_dim]`` or per row ``[B, T, head_dim]``. With ``caches`` (this
    block's ``[2, rows, kv_heads, S, head_dim]``: one for all rows, or one per row) its keys (rotated)
    and values written at ``starts`` and, with ``attend_cache``, attention over each cache's filled
    positions (a decode step; row by row where each row has its own) instead of this call's."""
    def add(residual: torch.Tensor, branch: torch.Tensor) -> torch.Tensor:
        return residual + branch if residual_scale is None else residual + branch * residual_scale

    n = layer.cfg.names
    attention = layer.attn
    q, k, v = (t.transpose(1, 2) for t in attention.project(layer.attention_input(x)))
    if rope is not None:
        cos, sin = (t[:, None] if t.dim() == 3 else t for t in rope)
        q, k = (apply_rotary(t, cos, sin, compute_dtype=torch.float32) for t in (q, k))
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    outs = []
    for i, (cache, start) in enumerate(zip(caches, starts)):
        rows = slice(i, i + 1) if len(caches) > 1 else slice(None)
        end = start + k.shape[2]
        cache[0, :, :, start:end] = k[rows]
        cache[1, :, :, start:end] = v[rows]
        if attend_cache:
            outs.append(F.scaled_dot_product_attention(q[rows], cache[0][:, :, :end], cache[1][:, :, :end],
                                                       is_causal=causal, enable_gqa=True))
    if not outs:
        outs = [F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)]
    attn = torch.cat(outs) if len(outs) > 1 else outs[0]
    b, _, t, _ = attn.shape
    h = add(x, attention.output(attn.transpose(1, 2).reshape(b, t, -1)))
    return add(h, getattr(layer, n.feed_forward)(getattr(layer, n.ffn_norm)(h)))


def run_stack(layers: Sequence[DecoderLayer], x: torch.Tensor, rope: Rope | None, *, causal: bool,
              residual_scale: float | None, caches: Sequence[torch.Tensor] = (), starts: Sequence[int] = (),
              attend_cache: bool = False) -> torch.Tensor | None:
    """``layers`` applied in turn to ``x`` ``[B, T, dim]`` as :func:`reference_block` applies each, in
    one kernel call; None where the kernel does not take this stack (see the module's docstring).
    ``rope``: cos / sin ``[T, head_dim]``, or per row ``[B, T, head_dim]``. ``caches``: one KV cache
    buffer ``[blocks, 2, B, kv_heads, S, head_dim]`` written at ``starts[0]``, or one per row
    (``[blocks, 2, 1, ...]``, row ``b`` at ``starts[b]``, attended row by row), block ``i`` with
    each buffer's ``[i]``."""
    if x.device.type != "cpu" or x.dtype != torch.float32 or x.dim() != 3 or not layers:
        return None
    if rope is not None and not all(t.dtype == torch.float32 and t.dim() in (2, 3) for t in rope):
        return None
    if any(cache.device.type != "cpu" or cache.dtype != torch.float32 for cache in caches):
        return None
    weights = _stack_weights(layers)
    op = kernel() if weights is not None else None
    if op is None:
        return None
    cfg = layers[0].cfg
    cos, sin = (t.contiguous() for t in rope) if rope is not None else (None, None)
    return op(x.contiguous(), weights, cfg.n_head, cfg.n_kv_head, cfg.head_dim, cfg.norm_eps,
              1.0 if residual_scale is None else residual_scale, causal, cos, sin, list(caches), list(starts),
              attend_cache)


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
    if type(cfg) is not DecoderConfig or not _takes(cfg):
        return None
    weights: list[torch.Tensor] = []
    for layer in layers:
        if layer.cfg != cfg:
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
    grouped heads: with RoPE, no causal mask and a residual scale over a sequence; then without a
    scale, causal, as a shared cache's prefill and one decode step, and one step of rows at other
    positions of their own caches with a RoPE table per row (outputs and cache writes)."""
    gen = torch.Generator().manual_seed(0)
    cfg = DecoderConfig(dim=64, n_head=4, n_kv_head=2, head_dim=16, intermediate_size=96, norm_eps=1e-5)
    layers = [_random_layer(cfg, gen) for _ in range(2)]
    weights = _weights(layers)
    x = torch.randn(2, 6, 64, generator=gen)
    angles = torch.randn(2, 6, 16, generator=gen)
    cos, sin = angles.cos(), angles.sin()

    def same(part: torch.Tensor, rope: Rope | None, causal: bool, scale: float | None,
             caches: list[torch.Tensor], starts: list[int], attend: bool) -> bool:
        theirs = [cache.clone() for cache in caches]
        want = part
        for i, layer in enumerate(layers):
            want = reference_block(layer, want, rope, causal=causal, residual_scale=scale,
                                   caches=[cache[i] for cache in theirs], starts=starts, attend_cache=attend)
        got = op(part, weights, 4, 2, 16, 1e-5, 1.0 if scale is None else scale, causal,
                 *(rope or (None, None)), caches, starts, attend)
        return torch.equal(got, want) and all(torch.equal(a, b) for a, b in zip(caches, theirs))

    shared, rows = torch.zeros(2, 2, 2, 2, 8, 16), [torch.zeros(2, 2, 1, 2, 8, 16) for _ in range(2)]
    per_row = (cos[:, 5:].contiguous(), sin[:, 5:].contiguous())  # one table a row
    return (same(x[:, :5].contiguous(), (cos[0, :5], sin[0, :5]), False, 0.7, [], [], False)
            and same(x[:, :5].contiguous(), None, True, None, [shared], [0], False)
            and same(x[:, 5:].contiguous(), None, False, None, [shared], [5], True)
            and same(x[:, 5:].contiguous(), per_row, False, 0.7, rows, [3, 6], True))


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
