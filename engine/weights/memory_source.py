"""Tensors already in memory as a TensorSource: what a converter builds (Kokoro's ONNX import, voice packs)
before it is loaded into a module or written into a package."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch

from .source import TensorInfo, TensorSource, cast, dtype_name, unknown_tensor


class MemorySource(TensorSource):
    format = "memory"

    def __init__(self, tensors: Mapping[str, torch.Tensor], *, path: Path | None = None,
                 metadata: Mapping[str, object] | None = None) -> None:
        self._tensors = dict(tensors)
        self.path = path
        self.metadata = dict(metadata or {})
        self.files = {}

    def names(self) -> list[str]:
        return list(self._tensors)

    def info(self, name: str) -> TensorInfo:
        t = self._tensors.get(name)
        if t is None:
            raise unknown_tensor(self, name)
        return TensorInfo(name, tuple(t.shape), dtype_name(t.dtype))

    def get(self, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
        t = self._tensors.get(name)
        if t is None:
            raise unknown_tensor(self, name)
        return cast(t, dtype)
