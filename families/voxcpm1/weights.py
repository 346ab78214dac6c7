"""Weights of a VoxCPM1 / 1.5 model in every layout, mapped onto the shared VoxCPM modules.

Layouts (the spec's ``sources``, first fit wins):

- HF snapshot folder: ``model.safetensors`` (VoxCPM1.5) or ``pytorch_model.bin`` (VoxCPM-0.5B;
  ``torch.load(weights_only=True)``) plus ``audiovae.pth``; upstream names.
- our package GGUF: upstream names under ``weights/`` and ``audiovae_weights/``, sidecars embedded.
- VoxCPM.cpp GGUF (``general.architecture`` "llama", ``voxcpm_*`` config keys, ``tokenizer.ggml.*``):
  llama.cpp-style names (:func:`cpp_to_native`), VAE under ``audio_vae.`` with weight norm already
  folded, Snake ``alpha`` stored ``(C, 1)``, VAE conv weights 3-D ``(out, in, k)`` or, as VoxCPM.cpp's
  quantizer writes them, 2-D ``(out, in*k)``; any of F32/F16/BF16/Q8_0/K-quants.

Folded VAE weights: the shared AudioVAE holds plain convolutions with the folded ``weight`` (the
folder and package layouts fold ``weight_g``/``weight_v`` at load with ``torch._weight_norm``,
what upstream's weight-norm hook computes before every call). A VoxCPM.cpp GGUF's folded weights
therefore load as they are into the same convolutions: no tensor is synthesized and the
convolution computes exactly with the stored weight. Shapes that differ only in layout (``(C,1)``
alphas, 2-D-flattened convs, dropped unit dims) are reshaped to the module's shape
(:func:`reshape_to_module`); the element order is unchanged, so the reshape is exact.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from audiocpp.engine.device import auto_compute_mode, device_of
from audiocpp.engine.errors import ModelError
from audiocpp.engine.nn.build import build_on_meta, load_on_meta
from audiocpp.engine.spec.model_spec import ModelSpec
from audiocpp.engine.weights import (
    Rename,
    Reshape,
    ResolvedWeights,
    TensorOp,
    TensorSource,
    adapt,
    check_module_weights,
    resolve_weights,
)
from audiocpp.families.voxcpm2.codec import AudioVAE
from audiocpp.families.voxcpm2.config import VoxCPMConfig
from audiocpp.families.voxcpm2.model import VoxCPMModel
from audiocpp.families.voxcpm2.prompt_layout import VoxCPMTokenizer
from audiocpp.families.voxcpm2.weights import VoxCPM2Parts, read_config, vae_adapters

from .config import config_from_gguf

CPP_SOURCE = "voxcpm_cpp"

# llama.cpp block tensor names -> MiniCPM module names.
BLOCK = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
# Stack prefixes in VoxCPM.cpp -> the module that holds the MiniCPM stack.
STACKS = {
    "": "base_lm", "residual_lm.": "residual_lm", "locenc.": "feat_encoder.encoder",
    "locdit.": "feat_decoder.estimator.decoder",
}
# Everything else, by exact prefix (the rest of the name is kept).
PREFIXES = {
    "token_embd.": "base_lm.embed_tokens.",
    "locenc.in_proj.": "feat_encoder.in_proj.", "locenc.special_token": "feat_encoder.special_token",
    "locdit.in_proj.": "feat_decoder.estimator.in_proj.",
    "locdit.cond_proj.": "feat_decoder.estimator.cond_proj.",
    "locdit.out_proj.": "feat_decoder.estimator.out_proj.",
    "locdit.time_mlp.": "feat_decoder.estimator.time_mlp.",
    "locdit.delta_time_mlp.": "feat_decoder.estimator.delta_time_mlp.", "fsq.": "fsq_layer.",
    "proj.enc_to_lm.": "enc_to_lm_proj.", "proj.lm_to_dit.": "lm_to_dit_proj.",
    "proj.res_to_dit.": "res_to_dit_proj.", "proj.fusion_concat.": "fusion_concat_proj.",
    "stop.stop_proj.": "stop_proj.", "stop.stop_head.": "stop_head.",
}
_BLOCK_RE = re.compile(r"^(residual_lm\.|locenc\.|locdit\.|)blk\.(\d+)\.([a-z_]+)\.(weight|bias)$")
_NORM_RE = re.compile(r"^(residual_lm\.|locenc\.|locdit\.|)output_norm\.weight$")


def cpp_to_native(name: str) -> str:
    """A VoxCPM.cpp tensor name (weights namespace, ``audio_vae.`` stripped) -> upstream's name.
    Names it does not know are returned unchanged (strict loading then names them)."""
    m = _BLOCK_RE.match(name)
    if m and m[3] in BLOCK:
        return f"{STACKS[m[1]]}.layers.{m[2]}.{BLOCK[m[3]]}.{m[4]}"
    m = _NORM_RE.match(name)
    if m:
        return f"{STACKS[m[1]]}.norm.weight"
    for old, new in PREFIXES.items():
        if name.startswith(old):
            return new + name[len(old):]
    return name


def reshape_to_module(source: TensorSource, module: torch.nn.Module) -> list[TensorOp]:
    """Reshape ops for tensors whose stored shape differs from the module's only in layout
    (same element count): grouped by target shape, one op per shape."""
    wanted = {n: tuple(t.shape) for n, t in module.state_dict(keep_vars=True).items()}
    groups: dict[tuple[int, ...], list[str]] = defaultdict(list)
    for name in source.names():
        shape = wanted.get(name)
        if shape is None:
            continue
        stored = tuple(source.info(name).shape)
        if stored != shape and _numel(stored) == _numel(shape):
            groups[shape].append(name)
    return [Reshape(names, shape) for shape, names in groups.items()]


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def lm_source(resolved: ResolvedWeights, module: torch.nn.Module) -> TensorSource:
    """The generator's weights under upstream names, for any layout."""
    source = resolved.namespace("weights")
    if resolved.source_id != CPP_SOURCE:
        return source
    renamed = adapt(source, [Rename(cpp_to_native)])
    return adapt(renamed, reshape_to_module(renamed, module))


def vae_source(resolved: ResolvedWeights, cfg: VoxCPMConfig, module: torch.nn.Module) -> TensorSource:
    """The AudioVAE's weights: weight-norm pairs folded (folder, package) or folded already (VoxCPM.cpp)."""
    source = adapt(resolved.namespace("audiovae_weights"), vae_adapters(cfg))
    if resolved.source_id != CPP_SOURCE:
        return source
    return adapt(source, reshape_to_module(source, module))


@dataclass
class VoxCPM1Parts(VoxCPM2Parts):
    """:class:`VoxCPM2Parts` whose generator weights go through the VoxCPM1 adapters."""

    def model_source(self) -> TensorSource:
        return lm_source(resolve_weights(self.spec, self.path),
                         build_on_meta(lambda: VoxCPMModel(self.config)))


def _config(resolved: ResolvedWeights) -> VoxCPMConfig:
    if resolved.source_id == CPP_SOURCE:
        return config_from_gguf(resolved.metadata, str(resolved.path))
    return read_config(resolved.file("config"))


def _tokenizer(resolved: ResolvedWeights) -> VoxCPMTokenizer:
    if resolved.source_id == CPP_SOURCE:
        from audiocpp.engine.tokenizer import tokenizer_from_gguf

        return VoxCPMTokenizer(tokenizer_from_gguf(resolved.metadata, style="llama_bpe"))
    return VoxCPMTokenizer.from_file(resolved.file("tokenizer_json"))


def load_parts(path: Path, options: dict[str, Any] | None = None, *, spec: ModelSpec,
               bf16_for_quantized: bool = True) -> VoxCPM1Parts:
    """Resolve ``path``, read its config and tokenizer, load the AudioVAE (float32, as upstream)
    and check the generator weights strictly (names and shapes) without loading them.
    ``bf16_for_quantized``: the plugin's ``cpu_bf16_for_quantized`` (``compute_dtype=auto``)."""
    resolved = resolve_weights(spec, path)
    cfg = _config(resolved)
    if cfg.architecture != "voxcpm" and resolved.source_id == CPP_SOURCE:
        raise ModelError(  # VoxCPM.cpp's converter also writes VoxCPM2 checkpoints in this layout
            f"{path} is a VoxCPM.cpp GGUF of a {cfg.architecture!r} model; "
            "audiocpp reads VoxCPM.cpp GGUFs of VoxCPM1/1.5 only",
            hint="load the VoxCPM2 snapshot folder, or package it: "
                 "audiocpp package --spec model_specs/voxcpm2.json "
                 "--input FOLDER --type q8_0 --out voxcpm2-q8_0.gguf",
        )
    if cfg.architecture != "voxcpm":
        raise ModelError(
            f"{path} holds a {cfg.architecture!r} model, not a VoxCPM1/1.5 ('voxcpm') one",
            hint="VoxCPM2 checkpoints (architecture 'voxcpm2') belong to --family voxcpm2",
        )
    tokenizer = _tokenizer(resolved)
    device = device_of(options)
    model = build_on_meta(lambda: VoxCPMModel(cfg))
    model_src = lm_source(resolved, model)
    check_module_weights(model, model_src, what="VoxCPM1 generator")
    shapes = build_on_meta(lambda: AudioVAE(cfg.audio_vae))
    vae = load_on_meta(lambda: AudioVAE(cfg.audio_vae), vae_source(resolved, cfg, shapes),
                       dtype=torch.float32, what="AudioVAE", device=device)
    compute = auto_compute_mode(device, resolved.layout, model_src, gpu_dtype=torch.bfloat16,
                                bf16_for_quantized=bf16_for_quantized)
    return VoxCPM1Parts(cfg, vae.eval(), tokenizer, spec, Path(path), resolved.source_id, resolved.layout,
                        device, compute)
