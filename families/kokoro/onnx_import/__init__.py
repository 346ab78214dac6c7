"""Kokoro-82M's weights from kokoro-onnx's ONNX exports (``kokoro-v1.0.int8.onnx``, ``kokoro-v1.0.onnx``).

::

    weights = read_onnx_weights("kokoro-v1.0.int8.onnx")
    weights.kind                      # "int8" (dynamic quantization) or "float32"
    weights.float_tensors()           # {KModel name: float32 tensor}, dequantized as onnxruntime does
    weights.quantized                 # {KModel name: QuantizedTensor}: int8 values + scale, PyTorch layout
    model = load_on_meta(lambda: KModel(cfg), onnx_tensor_source(path), what="Kokoro")   # strict

The file is read by this package's own protobuf reader (``protobuf``; no ``onnx`` import), the weights are
found by walking the graph (``mapping``: node names and op types, so the float32 export and its
dynamically quantized int8 copy both map) and moved to PyTorch's layout (``values``). The ONNX files carry
no config and no vocab: the network's shapes are v1.0's (``config.V1_0``), checked tensor by tensor.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import torch

from audiocpp.engine.errors import ModelError
from audiocpp.engine.nn.build import build_on_meta
from audiocpp.engine.weights.source import TensorInfo, TensorSource, cast, still_whole, unknown_tensor

from ..config import V1_0, KokoroConfig
from ..model import KModel
from .mapping import Found, Mapping, map_weights
from .protobuf import Model, read_model
from .values import QuantizedTensor

_HINT = "give kokoro-onnx's kokoro-v1.0.onnx or kokoro-v1.0.int8.onnx (an export of Kokoro-82M v1.0)"

__all__ = ["OnnxSource", "OnnxWeights", "QuantizedTensor", "onnx_tensor_source", "read_onnx_weights"]


def shape_config() -> KokoroConfig:
    """v1.0's config with a one-symbol vocab: what gives the network its shapes (the vocab shapes nothing;
    the embedding tables follow ``n_token``)."""
    return KokoroConfig.from_dict({**V1_0, "vocab": {"a": 1}}, where="Kokoro v1.0 config")


@dataclass
class OnnxWeights:
    """The KModel tensors of one ONNX file (computed on demand; the file stays memory-mapped)."""

    path: Path
    model: Model
    mapping: Mapping

    @property
    def kind(self) -> str:
        """``"int8"`` when the graph stores weights as integers, ``"float32"`` otherwise."""
        return self.mapping.kind

    @property
    def defaults(self) -> list[str]:
        """Tensors the export provably lacks, given upstream's initial values (AdaIN instance norms)."""
        return list(self.mapping.defaults)

    def names(self) -> list[str]:
        return list(self.mapping.found)

    def found(self, name: str) -> Found:
        return self.mapping.found[name]

    def tensor(self, name: str) -> torch.Tensor:
        """One tensor in float32, owning its memory."""
        array = self.mapping.found[name].float32()
        if not array.flags.writeable or not array.flags.owndata:
            array = array.copy()
        return torch.from_numpy(array)

    def float_tensors(self) -> dict[str, torch.Tensor]:
        """Every KModel tensor in float32 (integer weights dequantized as onnxruntime dequantizes them)."""
        return {name: self.tensor(name) for name in self.mapping.found}

    @cached_property
    def quantized(self) -> dict[str, QuantizedTensor]:
        """The int8 form of every integer-stored weight whose ``q - zero_point`` fits in int8."""
        out = {}
        for name, found in self.mapping.found.items():
            q = found.quantized()
            if q is not None:
                out[name] = q
        return out

    def source(self) -> OnnxSource:
        return OnnxSource(self)


class OnnxSource(TensorSource):
    """A TensorSource over :class:`OnnxWeights`: KModel's names, float32 tensors."""

    format = "onnx"

    def __init__(self, weights: OnnxWeights) -> None:
        self.weights = weights
        self.path = weights.path
        self.metadata = {"onnx.kind": weights.kind, "onnx.producer": weights.model.producer}
        self.files = {}
        self._size = weights.path.stat().st_size

    def names(self) -> list[str]:
        return self.weights.names()

    def info(self, name: str) -> TensorInfo:
        if name not in self.weights.mapping.found:
            raise unknown_tensor(self, name)
        return TensorInfo(name, self.weights.found(name).shape, "F32")

    def get(self, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
        if name not in self.weights.mapping.found:
            raise unknown_tensor(self, name)
        still_whole(self.weights.path, self._size)
        return cast(self.weights.tensor(name), dtype)


def read_onnx_weights(path: str | Path, config: KokoroConfig | None = None) -> OnnxWeights:
    """Read kokoro-onnx's ONNX file at ``path`` and find every tensor of ``KModel(config)`` in it
    (default: v1.0's shapes). Raises ``ModelError`` for an unreadable file or a tensor it lacks."""
    path = Path(path)
    model = read_model(path)
    network = build_on_meta(lambda: KModel(config or shape_config()))
    try:
        mapping = map_weights(model.graph, network)
    except ModelError as exc:
        raise ModelError(f"{path}: {exc.message}", hint=exc.hint) from None
    except (KeyError, IndexError, ValueError, TypeError) as exc:  # a graph unlike kokoro-onnx's
        raise ModelError(f"{path} is not a Kokoro export this importer can map ({type(exc).__name__}: {exc})",
                         hint=_HINT) from None
    return OnnxWeights(path, model, mapping)


def onnx_tensor_source(path: str | Path, config: KokoroConfig | None = None) -> OnnxSource:
    """The float32 TensorSource of an ONNX file, under KModel's names (``load_on_meta`` loads it strictly)."""
    return read_onnx_weights(path, config).source()
