"""The one place that picks the layer a linear computes with, for its weight's storage, the
device and the CPU's kernels: :func:`linear_for`. Families say which of their layers may keep a
block-quantized weight quantized and whether faster float kernels are wanted (the load option
``packed_linear``); the layer is chosen here.

The layers (each in its own module):

======================================  =====================================================
weight                                  layer
======================================  =====================================================
Q8_0 / Q4_0 blocks kept quantized       CPU with the VNNI kernel, out features in 16s:
                                        :class:`~.q8_0_linear.Q8_0Linear` (the blocks as
                                        stored); else Q4_0 on a CPU with torch's int4 kernel,
                                        out features in 16s: :class:`~.quantized.Int4Linear`;
                                        everything else (CUDA, MPS, no kernel):
                                        :class:`~.quantized.Int8Linear` (int8, one scale a row)
float32 values of bfloat16, on the CPU  with ``bf16_weights`` and the AVX-512 kernel:
                                        :class:`~.bf16_linear.BF16WeightLinear` (bf16 held,
                                        float32 math)
float32 / bfloat16, on the CPU          with ``packed`` where oneDNN packs:
                                        :class:`~.packed_linear.PackedLinear`
anything else                           the ``nn.Linear`` itself (torch's GEMM)
======================================  =====================================================

Quantized layers are chosen while the module is still on the meta device, from the stored blocks
(:func:`quantize_linears`, before loading; the rest loads by name); float layers after loading
(:func:`fast_linears`). :func:`keep_quantized` says which layers a family's package keeps
quantized. None of the choices changes the numbers of a choice made before: the layers are those
of ``engine.nn.linear.quantized``, ``q8_0_linear``, ``bf16_linear`` and ``packed_linear`` (their
docstrings and docs/numerics.md give each one's drift).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

import torch
from torch import nn

from ...device import QUANTIZED_STORAGE, storage_dtype
from ...weights.blocks import BlockTensor
from ...weights.source import TensorSource
from . import bf16_linear, pack_cache, packed_linear, q8_0_linear, quantized


def linear_for(linear: nn.Linear, *, blocks: BlockTensor | None = None,
               device: torch.device | str | None = None, dtype: torch.dtype = torch.bfloat16,
               packed: bool = False, bf16_weights: bool = False) -> nn.Module:
    """The layer that computes ``linear`` (the module-level table).

    With ``blocks`` (the stored Q8_0 / Q4_0 matrix of its weight, kept quantized): the block layer
    on ``device`` (default: the CPU) with its scales in ``dtype``, ``linear``'s bias carried over as
    a parameter (a meta one is loaded by name afterwards). Without: ``linear`` is loaded and stays
    where it is; on the CPU, with ``bf16_weights`` a float32 weight holding bfloat16 values takes
    the bf16-weight kernel where it builds, and with ``packed`` a float32 / bfloat16 weight takes
    oneDNN's packed layout where this torch can (its pages of a memory-mapped file are released:
    the packed copy replaces it); anything else is ``linear`` itself."""
    if blocks is not None:
        layer = block_linear(blocks, torch.device(device if device is not None else "cpu"), dtype)
        if linear.bias is not None:
            layer.bias = nn.Parameter(linear.bias, requires_grad=False)
        return layer
    w = linear.weight
    if w.device.type != "cpu":
        return linear
    if bf16_weights:
        op = bf16_linear.kernel()
        if op is not None and bf16_linear.exactly_bf16(w):
            return bf16_linear.BF16WeightLinear(linear, op)
    if packed and w.dtype in (torch.float32, torch.bfloat16) and packed_linear.packing_available(w.dtype):
        from ...weights.gguf_file import release_pages

        layer = packed_linear.PackedLinear(linear)
        release_pages(w)  # a weight that viewed a memory-mapped file: its copy is the packed one
        return layer
    return linear


def block_linear(blocks: BlockTensor, device: torch.device, dtype: torch.dtype) -> nn.Module:
    """The layer for one stored Q8_0 / Q4_0 matrix on ``device``, its scales in ``dtype`` (the
    first row of the module-level table)."""
    if device.type == "cpu":
        if q8_0_linear.supports(blocks):
            return q8_0_linear.Q8_0Linear.from_blocks(blocks)
        if blocks.qtype == "Q4_0" and quantized.int4pack_available() and blocks.shape[0] % 16 == 0:
            return quantized.Int4Linear.from_blocks(blocks)
    q, s = quantized.requantize_rows(blocks)
    return quantized.Int8Linear(q.to(device), s.to(device=device, dtype=dtype))


def block_kernel_runs(device: torch.device) -> bool:
    """Whether block-quantized matrices on ``device`` run on the CPU's Q8_0 kernel (which builds it)."""
    return device.type == "cpu" and q8_0_linear.kernel() is not None


def keep_quantized(source: TensorSource, stored: bool, device: torch.device | str, *,
                   always: Iterable[str], many_rows: Iterable[str] = ()) -> tuple[str, ...]:
    """The globs of the linear layers a package keeps quantized on ``device`` in a compute mode that
    keeps weights ``stored`` (``engine.device.ComputeMode``): ``always`` (layers run on a row or two
    per weight read, where every int8 layer beats a float one) and, where the Q8_0 kernel runs them
    (a CPU, a block-quantized ``source``: the kernel is built only then), ``many_rows`` (layers run
    on tens of rows per weight read, where only that kernel beats the float GEMM; elsewhere they
    are dequantized to the compute dtype at load)."""
    globs, more = tuple(always), tuple(many_rows)
    if not stored:
        return ()
    if more and torch.device(device).type == "cpu" \
            and storage_dtype(source) in QUANTIZED_STORAGE and block_kernel_runs(torch.device(device)):
        return globs + more
    return globs


def quantize_linears(module: nn.Module, source: TensorSource, patterns: Iterable[str] = ("*",), *,
                     dtype: torch.dtype = torch.bfloat16, device: torch.device | str = "cpu") -> list[str]:
    """Replace the ``nn.Linear`` layers of ``module`` (matched by module name against the globs
    ``patterns``) whose weight ``source`` stores as a Q8_0 / Q4_0 matrix by the layers
    :func:`linear_for` picks for those blocks, on ``device``; the stored tensor's pages are
    released after. Returns the weight names replaced: load the rest of the module with them
    ignored (biases stay parameters and load by name)."""
    device = torch.device(device)
    globs = tuple(patterns)
    done: list[str] = []
    with pack_cache.collecting():  # what is packed here is written to the pack cache at the end
        for name, child in list(module.named_modules()):
            if not isinstance(child, nn.Linear) or not any(fnmatch.fnmatchcase(name, g) for g in globs):
                continue
            weight_name = f"{name}.weight"
            if weight_name not in source:
                continue
            blocks = source.blocks(weight_name)
            if blocks is None or blocks.shape != (child.out_features, child.in_features):
                continue
            layer = linear_for(child, blocks=blocks, device=device, dtype=dtype)
            source.release(weight_name)
            owner_name, _, leaf = name.rpartition(".")
            setattr(module.get_submodule(owner_name) if owner_name else module, leaf, layer)
            done.append(weight_name)
    return done


def fast_linears(module: nn.Module, *, packed: bool = True, bf16_weights: bool = False) -> int:
    """Replace the loaded ``nn.Linear`` layers under ``module`` by the float layers
    :func:`linear_for` picks (``packed``: oneDNN-packed weights; ``bf16_weights``: float32 layers
    holding bfloat16 values keep them in bfloat16); returns how many were replaced."""
    if bf16_weights:
        bf16_linear.kernel()  # built (or not) before the walk, once
    count = 0
    for name, child in list(module.named_children()):
        if isinstance(child, nn.Linear):
            layer = linear_for(child, packed=packed, bf16_weights=bf16_weights)
            if layer is not child:
                setattr(module, name, layer)
                count += 1
        else:
            count += fast_linears(child, packed=packed, bf16_weights=bf16_weights)
    return count
