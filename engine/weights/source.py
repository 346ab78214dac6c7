"""The TensorSource interface: named torch tensors from any supported storage.

Concrete sources (GGUF, safetensors, torch ``.pth``/``.bin``, HF folders, audio.cpp
package GGUFs) live beside this file; :func:`audiocpp.engine.weights.open_weights` picks
one by looking at the path. Names are the storage's own; per-family tensor adapters
(``adapters.py``) turn them into the family's module names.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # PyTorch order
    dtype: str  # storage type name: F32, F16, BF16, Q8_0, Q4_K, I64, ...


class TensorSource(ABC):
    """Read-only mapping of tensor names to tensors, plus metadata and sidecar files."""

    #: Key/value metadata (GGUF KV pairs; empty for formats without any).
    metadata: dict[str, Any]
    #: Sidecar files by logical name (``config.json``, ``tokenizer.json``...) -> path on disk.
    files: dict[str, Path]

    @abstractmethod
    def names(self) -> list[str]: ...

    @abstractmethod
    def info(self, name: str) -> TensorInfo: ...

    @abstractmethod
    def get(self, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
        """The tensor, dequantized if stored quantized; cast to ``dtype`` when given.

        Float storage (F32/F16/BF16) comes back in its own dtype unless ``dtype`` is set;
        block-quantized storage comes back as float32 (or ``dtype``).
        """

    def __contains__(self, name: object) -> bool:
        return name in set(self.names())

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def namespaces(self) -> list[str]:
        """Prefixes before '/' in the names (audio.cpp packages); empty when names are flat."""
        seen: dict[str, None] = {}
        for name in self.names():
            if "/" in name:
                seen.setdefault(name.split("/", 1)[0], None)
        return list(seen)

    def namespace(self, prefix: str) -> TensorSource:
        """A view of the tensors named ``prefix/<name>``, addressed as ``<name>``."""
        from .views import PrefixView

        return PrefixView(self, prefix)

    def state_dict(self, dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
        return {name: self.get(name, dtype) for name in self.names()}
