"""Views over a TensorSource: namespace prefixes (``ns/name`` or ``module.name``)."""

from __future__ import annotations

import torch

from ..errors import ModelError
from .source import TensorInfo, TensorSource


class PrefixView(TensorSource):
    """The tensors of ``base`` named ``prefix<sep><name>``, addressed as ``<name>``.

    ``sep="/"`` (default) is an audio.cpp package namespace; ``sep="."`` is a module
    prefix in a flat checkpoint. Metadata and sidecar files are the base's.
    """

    format = "view"

    def __init__(self, base: TensorSource, prefix: str, sep: str = "/") -> None:
        self.base = base
        self.prefix = prefix.rstrip(sep) + sep
        self.metadata = base.metadata
        self.files = base.files
        self.path = base.path
        self.format = base.format
        self.model_spec_json, self.family = base.model_spec_json, base.family
        self._names = [n[len(self.prefix) :] for n in base.names() if n.startswith(self.prefix)]
        if not self._names:
            if sep == "/":
                what, present = f"namespace {prefix!r}", ", ".join(base.namespaces()) or "none"
                hint = f"namespaces present: {present}"
            else:
                tops = dict.fromkeys(n.split(sep, 1)[0] for n in base.names() if sep in n)
                what, hint = f"tensors named {self.prefix}*", f"prefixes present: {', '.join(list(tops)[:12]) or 'none'}"
            raise ModelError(f"{base.describe()} has no {what}", hint=hint)

    def names(self) -> list[str]:
        return list(self._names)

    def info(self, name: str) -> TensorInfo:
        inner = self.base.info(self.prefix + name)
        return TensorInfo(name, inner.shape, inner.dtype)

    def get(self, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
        return self.base.get(self.prefix + name, dtype)

    def blocks(self, name: str):  # noqa: ANN201 - BlockTensor | None, as TensorSource.blocks
        return self.base.blocks(self.prefix + name)

    def release(self, name: str) -> None:
        self.base.release(self.prefix + name)

    def release_all(self) -> None:
        self.base.release_all()

    def __getattr__(self, attr: str):
        # model_spec_json, family, files_root... of a package stay reachable through a view.
        if attr.startswith("_") or attr == "base":
            raise AttributeError(attr)
        return getattr(self.base, attr)
