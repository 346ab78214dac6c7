"""Views over a TensorSource (namespace prefixes)."""

from __future__ import annotations

import torch

from ..errors import ModelError
from .source import TensorInfo, TensorSource


class PrefixView(TensorSource):
    def __init__(self, base: TensorSource, prefix: str) -> None:
        self.base = base
        self.prefix = prefix.rstrip("/") + "/"
        self.metadata = base.metadata
        self.files = base.files
        self._names = [n[len(self.prefix) :] for n in base.names() if n.startswith(self.prefix)]
        if not self._names:
            raise ModelError(
                f"the weights have no tensors in namespace {prefix!r}",
                hint=f"namespaces present: {', '.join(base.namespaces()) or 'none'}",
            )

    def names(self) -> list[str]:
        return list(self._names)

    def info(self, name: str) -> TensorInfo:
        inner = self.base.info(self.prefix + name)
        return TensorInfo(name, inner.shape, inner.dtype)

    def get(self, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
        return self.base.get(self.prefix + name, dtype)
