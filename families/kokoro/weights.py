"""Loading Kokoro: tensor adapters from every layout to ``model/``'s names, voices, and :func:`load_parts`.

Layouts:

- hexgrad's folder (``hexgrad/Kokoro-82M``): ``config.json``, ``kokoro-v1_0.pth`` (a dict of the five
  sub-state-dicts, keys prefixed ``module.``, weight-normed convolutions as ``weight_g`` / ``weight_v``,
  ALBERT's unused pooler), ``voices/*.pt``;
- our package GGUF (``audiocpp package``): the same names under ``weights/``, config and vocab embedded,
  the voices under ``voices/``;
- kokoro-onnx's ONNX files (int8 or float32) with their voices file: converted once into a package
  (``onnx_import``).

The adapters strip ``module.``, fold weight norm as upstream computes it (``torch._weight_norm``), drop
the pooler (and the position-id buffers older transformers saved), and give the instance norms of the
AdaIN layers upstream's initial ones and zeros where a checkpoint lacks them (upstream's ``KModel``
builds them ``affine=True`` but loads the released file with ``strict=False``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from audiocpp.engine.errors import ModelError
from audiocpp.engine.weights.adapters import (
    AdaptedSource,
    Defaults,
    Drop,
    FoldWeightNorm,
    Rename,
    TensorOp,
    adapt,
)
from audiocpp.engine.weights.source import TensorSource

from .config import KokoroConfig
from .model import KModel
from .model.istftnet import AdaIN1d

SUB_MODELS = ("bert", "bert_encoder", "predictor", "text_encoder", "decoder")
DROP = ("bert.pooler.*", "bert.embeddings.position_ids", "bert.embeddings.token_type_ids")


def instance_norm_defaults(model: KModel) -> TensorOp:
    """The initial weight (ones) and bias (zeros) of every AdaIN instance norm, for checkpoints that lack
    them (one ``Defaults`` op: a name the checkpoint has keeps its value)."""
    tensors: dict[str, torch.Tensor] = {}
    for name, module in model.named_modules():
        if isinstance(module, AdaIN1d):
            width = module.norm.num_features
            tensors[f"{name}.norm.weight"] = torch.ones(width)
            tensors[f"{name}.norm.bias"] = torch.zeros(width)
    return Defaults(tensors)


class DequantizeInt8(TensorOp):
    """``<name>.int8`` (int8, zero point already taken) and ``<name>.scale`` (float32, broadcast per output
    channel) -> ``<name>`` = ``float32(int8) * scale``: onnxruntime's ``DequantizeLinear`` on the stored
    values, one rounding, the same bits. ``placeholders``: names whose float values nobody reads (the
    convolutions the int8 kernel replaces right after loading): left uninitialized, not computed."""

    def __init__(self, placeholders: frozenset[str] = frozenset()) -> None:
        self.placeholders = placeholders

    def apply(self, source: TensorSource) -> TensorSource:
        from audiocpp.engine.weights.adapters import Entry, Layer, passthrough

        from .onnx_package import INT8_SUFFIX, SCALE_SUFFIX

        names = set(source.names())
        pairs = {n[: -len(INT8_SUFFIX)] for n in names
                 if n.endswith(INT8_SUFFIX) and n[: -len(INT8_SUFFIX)] + SCALE_SUFFIX in names}
        entries = {}
        for name in source.names():
            stem = name[: -len(INT8_SUFFIX)] if name.endswith(INT8_SUFFIX) else (
                name[: -len(SCALE_SUFFIX)] if name.endswith(SCALE_SUFFIX) else None)
            if stem in pairs:
                continue
            entries[name] = passthrough(source, name)
        for stem in pairs:
            def info(stem: str = stem) -> tuple[tuple[int, ...], str]:
                return source.info(stem + INT8_SUFFIX).shape, "F32"

            def load(dtype: torch.dtype | None, stem: str = stem) -> torch.Tensor:
                if stem in self.placeholders:
                    return torch.empty(source.info(stem + INT8_SUFFIX).shape, dtype=dtype or torch.float32)
                values = source.get(stem + INT8_SUFFIX)
                scale = source.get(stem + SCALE_SUFFIX, torch.float32)
                out = values.to(torch.float32) * scale
                return out if dtype is None else out.to(dtype)

            entries[stem] = Entry(info, load)
        return Layer(source, entries)


def hexgrad_source(source: TensorSource, model: KModel, placeholders: frozenset[str] = frozenset()
                   ) -> AdaptedSource:
    """hexgrad's checkpoint (flattened ``<sub-model>.<name>``), or a package made from either layout,
    under ``model``'s names (``placeholders``: see :class:`DequantizeInt8`)."""
    return adapt(source, [
        DequantizeInt8(placeholders),
        Rename(rf"^({'|'.join(SUB_MODELS)})\.module\.", r"\1."),
        Drop(*DROP),
        FoldWeightNorm(dim=None),
        instance_norm_defaults(model),
    ])


def read_config(path: Path) -> KokoroConfig:
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read {path}: {exc}") from None
    return KokoroConfig.from_dict(raw, where=str(path))


@dataclass
class KokoroParts:
    """A loaded Kokoro: the network in the default compute mode (``compute``), its voices, and how to load
    the network again in another mode (``load_net``)."""

    config: KokoroConfig
    model: KModel
    voices: Any  # voices.VoiceBank
    source_id: str
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    compute: Any = None  # engine.device.ComputeMode
    load_net: Any = None  # (ComputeMode) -> KModel


def int8_weights(source: TensorSource) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """The int8 weights a package keeps (``<name>.int8`` beside ``<name>.scale``), by the model's names."""
    from .onnx_package import INT8_SUFFIX, SCALE_SUFFIX

    names = set(source.names())
    return {name[: -len(INT8_SUFFIX)]: (source.get(name), source.get(name[: -len(INT8_SUFFIX)] + SCALE_SUFFIX,
                                                                         torch.float32))
            for name in names
            if name.endswith(INT8_SUFFIX) and name[: -len(INT8_SUFFIX)] + SCALE_SUFFIX in names}


def int8_convolution_names(model: KModel, quantized: dict[str, tuple[torch.Tensor, torch.Tensor]]
                           ) -> list[str]:
    """The decoder's convolutions (module names) whose weight the package stores as int8 and that the int8
    kernel (``engine.nn.kernels.int8_conv``) can compute; none where the kernel is not there. ``model`` may
    still be on the meta device. The decoder is 93 % of the work; the prosody predictor stays float32, so that
    the F0 curve the harmonic source integrates (its phase, hence the waveform) and the durations are the
    float32 path's."""
    from audiocpp.engine.nn.kernels.int8_conv import applies

    return [name for name, module in model.named_modules()
            if name.startswith("decoder.") and f"{name}.weight" in quantized and applies(module)]


def int8_convolutions(model: KModel, quantized: dict[str, tuple[torch.Tensor, torch.Tensor]],
                      names: list[str]) -> None:
    """Put the int8 layer in place of the convolutions ``names`` (:func:`int8_convolution_names`)."""
    from audiocpp.engine.nn.kernels.int8_conv import int8_conv

    for name in names:
        layer = int8_conv(model.get_submodule(name), *quantized[f"{name}.weight"])
        if layer is None:
            raise ModelError(f"the int8 kernel cannot compute {name} of Kokoro's decoder")
        parent, _, leaf = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, leaf, layer)


def folder_voices(folder: Path) -> dict[str, torch.Tensor]:
    """hexgrad's ``voices/*.pt``, else a voices archive beside the weights (``voices-v1.0.bin``,
    ``voices*.npz``)."""
    from .voices import read_voice_files

    found = sorted((folder / "voices").glob("*.pt")) if (folder / "voices").is_dir() else []
    if not found:
        found = sorted(p for p in folder.iterdir() if p.is_file() and p.name.startswith("voices")
                       and p.suffix in (".bin", ".npz"))
    return read_voice_files(found)


def namespace_voices(source: TensorSource) -> dict[str, torch.Tensor]:
    return {name: source.get(name, torch.float32) for name in source.names()}


def load_parts(path: Path, options: dict[str, Any] | None = None, *, spec: Any) -> KokoroParts:
    """Resolve ``path`` (hexgrad's folder or our package), read the config, load ``KModel`` strictly in
    float32 and the voices. kokoro-onnx's ONNX files are converted into a package first (``onnx_package``)."""
    from audiocpp.engine.device import device_of
    from audiocpp.engine.nn.build import build_on_meta, load_on_meta
    from audiocpp.engine.weights.resolve import resolve_weights

    from .voices import VoiceBank

    path = Path(path)
    if path.suffix.lower() == ".onnx":
        from .onnx_package import onnx_package

        path = onnx_package(path)
    weights = resolve_weights(spec, path)
    cfg = read_config(weights.file("config"))
    device = device_of(options)
    stored = int8_weights(weights.namespace("weights")) if weights.layout == "package" else {}
    compute = default_compute(device, bool(stored))

    def load_net(mode: Any, source: TensorSource | None = None) -> KModel:
        """The network on ``device`` computing in ``mode``: float32 over the (dequantized) weights, or with
        ``mode.stored`` the package's int8 convolutions on the int8 kernel."""
        if source is None:
            source = resolve_weights(spec, path).namespace("weights")
        meta = build_on_meta(lambda: KModel(cfg))
        # the convolutions the int8 kernel takes over: their float weights are never computed
        swap = int8_convolution_names(meta, stored) if mode.stored and stored and device.type == "cpu" else []
        placeholders = frozenset(f"{name}.weight" for name in swap)
        net = load_on_meta(lambda: KModel(cfg), hexgrad_source(source, meta, placeholders), what="Kokoro",
                           device=device).eval()
        if swap:
            int8_convolutions(net, stored, swap)
        return net

    model = load_net(compute, weights.namespace("weights"))
    if "voices" in weights.namespaces:
        packs = namespace_voices(weights.namespaces["voices"])
    elif weights.layout == "folder":
        packs = folder_voices(weights.path)
    else:
        packs = {}
    voices = VoiceBank(packs, origin=str(path))
    bad = [n for n in voices.names if voices.pack(n).shape[-1] != 2 * cfg.style_dim]
    if bad:
        raise ModelError(f"voice {bad[0]!r} of {path} has style width {voices.pack(bad[0]).shape[-1]}; this "
                         f"model needs {2 * cfg.style_dim}", hint="use the voices made for this model")
    return KokoroParts(cfg, model, voices, weights.source_id, device, compute, load_net)


def default_compute(device: torch.device, int8_stored: bool) -> Any:
    """``compute_dtype=auto``: on the CPU, ``float32-stored`` for a package that keeps int8 weights (its
    convolutions on the int8 kernel: the default model), else ``float32`` (exact against upstream).
    ``$AUDIOCPP_COMPUTE_DTYPE`` pins it."""
    import os

    from audiocpp.engine.device import COMPUTE_DTYPE_ENV, compute_mode

    forced = os.environ.get(COMPUTE_DTYPE_ENV, "").strip()
    if forced and forced.lower() != "auto":
        return check_compute(compute_mode(forced))
    return compute_mode("float32-stored" if int8_stored and device.type == "cpu" else "float32")


def check_compute(mode: Any) -> Any:
    from audiocpp.engine.errors import UsageError

    if mode.dtype != torch.float32:
        raise UsageError(f"Kokoro computes in float32, not {mode.name}",
                         hint="compute_dtype float32 (exact against upstream) or float32-stored (an int8 "
                         "package's convolutions on the int8 kernel); auto picks between them")
    return mode


def package_plan(plugin: Any, inputs: dict[str, Path]) -> Any:
    """``audiocpp package`` for a hexgrad folder (or a package, re-encoded): the spec's plan with the
    weights adapted to the model's names and the folder's voices added (namespace ``voices``)."""
    from audiocpp.engine.nn.build import build_on_meta
    from audiocpp.engine.packaging.plan import MODEL_INPUT, plan_from_spec
    from audiocpp.engine.weights.memory_source import MemorySource

    plan = plan_from_spec(plugin.spec, inputs)
    config = plan.files.get("config.json")
    if config is None:
        raise ModelError("the Kokoro input has no config.json", hint="package hexgrad's folder (config.json, "
                         "kokoro-v1_0.pth, voices/*.pt) or one of our Kokoro packages")
    raw = config if isinstance(config, bytes) else Path(config).read_bytes()
    cfg = KokoroConfig.from_dict(json.loads(raw.decode("utf-8")), where="config.json")
    meta = build_on_meta(lambda: KModel(cfg))
    plan.namespaces["weights"] = hexgrad_source(plan.namespaces["weights"], meta)
    model = inputs.get(MODEL_INPUT)
    if "voices" not in plan.namespaces and model is not None and Path(model).is_dir():
        packs = folder_voices(Path(model))
        if packs:
            plan.namespaces["voices"] = MemorySource(packs)
    return plan
