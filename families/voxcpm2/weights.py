"""Weights: tensor adapters and loading (:func:`load_parts`) for every layout of a VoxCPM2 model.

Layouts (all resolved by the spec's ``sources``):

- the HF snapshot folder: ``model.safetensors`` (names native) and ``audiovae.pth``
  (``{"state_dict": ...}``, read with ``torch.load(weights_only=True)``; or ``audiovae.safetensors``);
- our package GGUF and audio.cpp's VoxCPM2 GGUF: upstream names under the namespaces
  ``weights/`` and ``audiovae_weights/`` (physical ``_audiocpp.N`` aliases resolved by the
  engine's PackageSource), AudioVAE weight-norm pairs stored unfolded.

Both need one adapter: the AudioVAE's ``*.weight_g`` / ``*.weight_v`` pairs fold into the
``*.weight`` our convolutions hold (``w = g * v / ||v||`` over dim 0, what upstream's
``weight_norm`` hook computes before every call). A layout with the VAE already folded passes
through unchanged. The voxcpm1 variant (``families/voxcpm1/weights.py``) subclasses
:class:`VoxCPM2Parts` to add VoxCPM.cpp's GGUF layout.
"""

from __future__ import annotations

import gc
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from audiocpp.engine.device import ComputeMode, auto_compute_mode, compute_mode, device_of
from audiocpp.engine.errors import ModelError
from audiocpp.engine.nn.build import build_on_meta, load_on_meta
from audiocpp.engine.spec.model_spec import ModelSpec
from audiocpp.engine.weights import (
    FoldWeightNorm,
    Synthesize,
    TensorOp,
    TensorSource,
    adapt,
    check_module_weights,
    resolve_weights,
)

from .codec import AudioVAE
from .config import VoxCPMConfig
from .model import VoxCPMModel
from .prompt_layout import VoxCPMTokenizer


def lm_adapters(cfg: VoxCPMConfig) -> list[TensorOp]:
    """Adapters of the ``weights`` namespace: upstream names are ours."""
    return []


def vae_adapters(cfg: VoxCPMConfig) -> list[TensorOp]:
    ops: list[TensorOp] = [FoldWeightNorm(dim=0)]
    boundaries = cfg.audio_vae.sr_bin_boundaries
    if boundaries is not None:
        # A derived buffer: some converters drop it; it is the config's list.
        ops.append(Synthesize("decoder.sr_bin_boundaries", torch.tensor(boundaries, dtype=torch.int32),
                              if_missing=True))
    return ops


#: The generator's linear layers that a Q8_0 / Q4_0 package keeps quantized under a 16-bit compute
#: dtype: the two MiniCPM LMs, most of the weights, run on one row per step, where every int8
#: kernel beats bfloat16.
QUANTIZED_LINEARS = ("base_lm.*", "residual_lm.*")
#: Also kept quantized where the CPU's Q8_0 kernel runs (engine.nn.linear.q8_0_linear): the local encoder
#: and DiT, run on 10-20 rows per weight read every Euler step, where that kernel beats the
#: bfloat16 GEMM and the per-row int8 layer does not (docs/numerics.md); elsewhere they are
#: dequantized to the compute dtype at load.
KERNEL_QUANTIZED_LINEARS = ("feat_encoder.*", "feat_decoder.*")
#: Lookup tables kept in the dtype they are stored in (a package's F16 text embedding is a view of
#: the file, not a float32 copy made at every start); their rows are cast to the compute dtype when
#: looked up (``VoxCPMGenerator._prefill``), the values a table cast whole would give.
STORED_TABLES = ("base_lm.embed_tokens.weight",)


def quantized_linears(source: TensorSource, mode: ComputeMode, device: torch.device) -> tuple[str, ...]:
    """The globs of the linear layers that ``source`` keeps quantized computing in ``mode`` on
    ``device`` (``engine.nn.linear.choice.keep_quantized``: the kernel is built only for a quantized
    package that will use it)."""
    from audiocpp.engine.nn.linear.choice import keep_quantized

    return keep_quantized(source, mode.stored, device, always=QUANTIZED_LINEARS,
                          many_rows=KERNEL_QUANTIZED_LINEARS)


@dataclass
class VoxCPM2Parts:
    """A loaded model: the AudioVAE (the codec) and tokenizer ready, the generator weights
    checked; the generator itself is loaded per compute dtype on first use (:meth:`build_model`)."""

    config: VoxCPMConfig
    codec: AudioVAE
    tokenizer: VoxCPMTokenizer
    spec: ModelSpec
    path: Path
    source_id: str
    layout: str
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    #: ``compute_dtype=auto`` (``engine.device.auto_compute_mode``)
    compute: ComputeMode = field(default_factory=lambda: compute_mode("float32"))

    def model_source(self) -> TensorSource:
        return adapt(resolve_weights(self.spec, self.path).namespace("weights"), lm_adapters(self.config))

    def build_model(self, mode: ComputeMode | torch.dtype, *, packed: bool = False) -> VoxCPMModel:
        """The generator computing in ``mode`` (a dtype: its mode; checkpoints are bf16; float32 is
        exact against upstream run in float32) on the parts' device, its linear layers on
        oneDNN-packed weights if ``packed`` (CPU). A Q8_0 / Q4_0 package in a mode that keeps
        weights stored keeps the LMs' linears quantized (:func:`quantized_linears`). The weights
        file is opened for this and unmapped after, unless parameters still view it (a bf16
        checkpoint loaded in bf16 without packing: zero-copy); copied tensors release their pages
        of the file as they are made."""
        from audiocpp.engine.weights.gguf_file import mapped_file, release_pages

        mode = compute_mode(mode)
        source = self.model_source()  # kept until the end: packing releases the pages of what it copies
        model = load_on_meta(lambda: VoxCPMModel(self.config), source, dtype=mode.dtype,
                             what="VoxCPM2 generator", device=self.device,
                             quantize=quantized_linears(source, mode, self.device), stored=mode.stored,
                             keep_stored=STORED_TABLES)
        if packed and self.device.type == "cpu":
            from audiocpp.engine.nn.linear.choice import fast_linears

            fast_linears(model, packed=True)
            for name, param in model.named_parameters():  # the rest may still view the file: own them
                if name not in STORED_TABLES and mapped_file(param) is not None:
                    old = param.data
                    param.data = old.clone()
                    release_pages(old)
            source.release_all()
        del source
        if not any(mapped_file(param) is not None for param in model.parameters()):
            gc.collect()  # the source's map sits in a reference cycle: unmap it now (no tensor views it)
        return model.eval()


def read_config(path: Path) -> VoxCPMConfig:
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelError(f"cannot read the VoxCPM config {path}: {exc}") from None
    return VoxCPMConfig.from_dict(raw, where=str(path))


def load_parts(path: Path, options: dict[str, Any] | None = None, *, spec: ModelSpec,
               expect_architecture: str = "voxcpm2") -> VoxCPM2Parts:
    """Resolve ``path`` with the spec, load the AudioVAE (float32, as upstream keeps it) and the
    tokenizer, and check the generator weights strictly (names and shapes) without loading them."""
    resolved = resolve_weights(spec, path)
    cfg = read_config(resolved.file("config"))
    if cfg.architecture != expect_architecture:
        raise ModelError(
            f"{path} holds a {cfg.architecture!r} model, not {expect_architecture!r}",
            hint="VoxCPM1/1.5 checkpoints (architecture 'voxcpm') belong to --family voxcpm1",
        )
    tokenizer = VoxCPMTokenizer.from_file(resolved.file("tokenizer_json"))
    device = device_of(options)
    model_src: TensorSource = adapt(resolved.namespace("weights"), lm_adapters(cfg))
    check_module_weights(build_on_meta(lambda: VoxCPMModel(cfg)), model_src, what="VoxCPM2 generator")
    vae_src: TensorSource = adapt(resolved.namespace("audiovae_weights"), vae_adapters(cfg))
    vae = load_on_meta(lambda: AudioVAE(cfg.audio_vae), vae_src, dtype=torch.float32, what="AudioVAE",
                       device=device)
    compute = auto_compute_mode(device, resolved.layout, model_src, gpu_dtype=torch.bfloat16)
    return VoxCPM2Parts(cfg, vae.eval(), tokenizer, spec, Path(path), resolved.source_id, resolved.layout,
                        device, compute)
