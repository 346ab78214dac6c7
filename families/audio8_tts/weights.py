"""Weights of every Audio8 TTS layout, their adapters and :func:`load_parts`.

Layouts (resolved by the spec's ``sources``; all detected automatically):

- the HF snapshot folder: ``model.safetensors`` (the DualAR, upstream names, bf16), ``codec.pth``
  (read with ``torch.load(weights_only=True)``: conv weight norm as
  ``*.parametrizations.weight.original0/1``, VQ projections as ``*.weight_g/_v``; a
  ``state_dict`` wrapper or a ``generator.`` prefix is unwrapped as upstream's ``load_codec``
  does, ``freqs_cis`` / ``causal_mask`` buffers dropped), tokenizer and config files;
- our package GGUF (``audiocpp package``): the same tensors under ``model_weights/`` and
  ``codec_weights/``, sidecar files embedded;
- audio.cpp's package: the same namespaces, the codec's weight norm already fused
  (``*.conv.weight``, ``*.in_proj.weight``), long names stored as ``_audiocpp.<i>`` (resolved by
  the engine's package reader), ``config.json`` / tokenizer files embedded.

One adapter list serves them all: weight-norm pairs are folded (``torch._weight_norm``, what
upstream computes every forward); fused weights pass through.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer

from audiocpp.engine.device import ComputeMode, auto_compute_mode, compute_mode, device_of, storage_dtype
from audiocpp.engine.errors import ModelError
from audiocpp.engine.nn.build import meta_device
from audiocpp.engine.nn.linear.choice import fast_linears, quantize_linears
from audiocpp.engine.spec.model_spec import ModelSpec
from audiocpp.engine.tokenizer import load_tokenizer
from audiocpp.engine.weights import (
    Drop,
    FoldWeightNorm,
    Keep,
    Rename,
    TensorOp,
    TensorSource,
    adapt,
    check_module_weights,
    load_module_weights,
    resolve_weights,
)

from .codec import ArkttsCodec
from .config import Audio8Config
from .model.dual_ar import DualAR


def codec_adapters(source: TensorSource) -> list[TensorOp]:
    ops: list[TensorOp] = []
    if any("generator." in n for n in source.names()):  # upstream keeps only the generator's keys
        ops += [Keep("*generator.*"), Rename(lambda n: n.replace("generator.", ""))]
    return ops + [Drop("*freqs_cis", "*causal_mask"), FoldWeightNorm(dim=0)]


def model_adapters(source: TensorSource) -> list[TensorOp]:
    """The DualAR's names are upstream's in every layout."""
    return [Drop("freqs_cis", "fast_freqs_cis")]


@dataclass
class Audio8Parts:
    """A loaded checkpoint: config, tokenizer and codec ready; the DualAR checked and built per
    compute dtype on demand (:meth:`build_model`)."""

    config: Audio8Config
    tokenizer: Tokenizer
    codec: ArkttsCodec
    spec: ModelSpec
    path: Path
    source_id: str
    layout: str
    metadata: dict[str, Any] = field(default_factory=dict)
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    #: ``compute_dtype=auto`` (``engine.device.auto_compute_mode``)
    compute: ComputeMode = field(default_factory=lambda: compute_mode("float32"))

    def model_source(self) -> TensorSource:
        source = resolve_weights(self.spec, self.path).namespace("model_weights")
        return adapt(source, model_adapters(source))

    def build_model(self, mode: ComputeMode | torch.dtype = torch.float32, *, packed: bool = False) -> DualAR:
        """The DualAR computing in ``mode`` (a dtype: its mode; float32 is exact against upstream) on
        the parts' device. With ``packed`` (CPU), its linear layers run on faster kernels: in
        float32, layers whose weights are bfloat16 values (the real checkpoint stores bf16) keep them
        in bfloat16 and compute in float32 (``engine.nn.linear.bf16_linear``); the others use oneDNN-packed
        weights (``engine.nn.linear.packed_linear``). A Q8_0 / Q4_0 package in a mode that keeps weights
        stored keeps its quantized linears quantized (the block kernel: int8 rows per block).
        ``engine.nn.linear.choice`` picks each layer."""
        mode = compute_mode(mode)
        dtype = mode.dtype
        from audiocpp.engine.weights.gguf_file import mapped_file, release_pages

        device = self.device
        with meta_device():
            model = DualAR(self.config)
        source = self.model_source()
        for module, src, what in ((model.slow, adapt(source, [Drop("fast_*")]), "Audio8 TTS slow AR"),
                                  (model.fast, adapt(source, [Keep("fast_*")]), "Audio8 TTS fast AR")):
            ignore: list[str] = []
            if mode.stored:
                check_module_weights(module, src, what=what)
                ignore = quantize_linears(module, src, dtype=dtype, device=device)
            load_module_weights(module, src, dtype=dtype, what=what, ignore=ignore, device=device)
        _materialize(model, dtype)
        model.to(device)
        if packed and device.type == "cpu":
            # float32: bf16-stored weights keep bf16 under float32 math (half the bytes read)
            fast_linears(model, packed=True, bf16_weights=dtype == torch.float32)
        for p in model.parameters():  # own the weights: do not keep the file mapped
            if mapped_file(p) is not None:
                old = p.data
                p.data = old.clone()
                release_pages(old)  # the file's pages leave the process as the copy is made
        source.release_all()
        gc.collect()
        return model.eval()


def load_parts(spec: ModelSpec, path: Path, options: dict[str, Any] | None = None, *,
               bf16_for_quantized: bool = True) -> Audio8Parts:
    """Resolve ``path`` with the spec; read the config and tokenizer, load the codec (float32,
    as upstream runs it on CPU) and check the DualAR's tensors (names and shapes) strictly.
    ``bf16_for_quantized``: the plugin's ``cpu_bf16_for_quantized`` (``compute_dtype=auto``)."""
    resolved = resolve_weights(spec, path)
    cfg = Audio8Config.from_file(resolved.file("config"))
    tokenizer = load_tokenizer(resolved.file("tokenizer_json"))
    with meta_device():
        model = DualAR(cfg)
        codec = ArkttsCodec(cfg.codec)
    source = resolved.namespace("model_weights")
    source = adapt(source, model_adapters(source))
    check_module_weights(model.slow, adapt(source, [Drop("fast_*")]), what="Audio8 TTS slow AR")
    check_module_weights(model.fast, adapt(source, [Keep("fast_*")]), what="Audio8 TTS fast AR")
    device = device_of(options)
    raw = resolved.namespace("codec_weights")
    codec_src = adapt(raw, codec_adapters(raw))
    # The codec computes in float32 (as upstream on CPU) whatever its storage. A Q8_0 / Q4_0
    # package keeps its quantized linears int8 (each call converts the matrix: as fast as float32
    # weights here, the convolutions dominate); a BF16 one keeps bf16 linear weights under the
    # float32 math of engine.nn.linear.bf16_linear where that kernel builds.
    check_module_weights(codec, codec_src, what="Audio8 TTS codec")
    ignore = quantize_linears(codec, codec_src, dtype=torch.float32, device=device)
    load_module_weights(codec, codec_src, dtype=torch.float32, what="Audio8 TTS codec", ignore=ignore,
                        device=device)
    _materialize(codec, torch.float32)
    codec.to(device)
    raw.release_all()  # the folded weight-norm pairs' pages (the codec holds its own copies)
    if device.type == "cpu" and storage_dtype(raw) == "BF16":
        fast_linears(codec, packed=False, bf16_weights=True)
    compute = auto_compute_mode(device, resolved.layout, source, gpu_dtype=torch.bfloat16,
                                bf16_for_quantized=bf16_for_quantized)
    return Audio8Parts(cfg, tokenizer, codec.eval(), spec, Path(path), resolved.source_id, resolved.layout,
                       dict(resolved.metadata), device, compute)


#: Parameters held in float32 whatever the compute dtype: the Falcon-H1 (0.1B) slow AR's Mamba2
#: SSM parameters and depthwise conv, as upstream computes them and audio.cpp stores them.
FLOAT32_PARAMETERS = (".mamba.A_log", ".mamba.D", ".mamba.dt_bias", ".mamba.conv1d.weight",
                      ".mamba.conv1d.bias")


def _materialize(module: torch.nn.Module, dtype: torch.dtype) -> None:
    for name, tensor in list(module.named_parameters()):
        if tensor.device.type == "meta":
            raise ModelError(f"tensor {name!r} was not loaded")
    for name, p in module.named_parameters():
        if p.is_floating_point() and p.dtype != dtype and not name.endswith(FLOAT32_PARAMETERS):
            p.data = p.data.to(dtype)
