"""Loading the toy model from a folder or a package GGUF (the spec's two ``sources``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from audiocpp.engine.plugin_api import ModelSpec, load_on_meta, resolve_weights

from .config import ToneConfig
from .model import ToneBank


@dataclass
class ToneParts:
    config: ToneConfig
    bank: ToneBank


def load_parts(path: Path, options: dict[str, Any] | None = None, *, spec: ModelSpec) -> ToneParts:
    weights = resolve_weights(spec, path)  # a folder or a package GGUF, as the spec's sources say
    config = ToneConfig.from_file(weights.file("config"))  # a Path (in a package: the extracted copy)
    source = weights.namespace("weights")  # a TensorSource over the "weights" tensors
    size = source.info("tone.frequencies").shape[0] if "tone.frequencies" in source.names() else 0
    bank = load_on_meta(lambda: ToneBank(size), source, dtype=torch.float32, what="toy tone")
    return ToneParts(config, bank)
