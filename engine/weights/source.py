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
from typing import TYPE_CHECKING, Any

import torch

from ..errors import ModelError

if TYPE_CHECKING:
    from .blocks import BlockTensor


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # PyTorch order
    dtype: str  # storage type name: F32, F16, BF16, Q8_0, Q4_K, I64, ...


class TensorSource(ABC):
    """Read-only mapping of tensor names to tensors, plus metadata and sidecar files.

    Implementations: ``GGUFSource`` (plain GGUF), ``PackageSource`` (audio.cpp package
    GGUF), ``SafetensorsSource`` / ``ShardedSource`` (safetensors, sharded indexes),
    ``TorchSource`` (``.pth``/``.bin``/``.pt``, ``weights_only``), ``FolderSource`` (HF
    snapshot folder), plus the views (``PrefixView``) and ``AdaptedSource``.
    """

    #: Storage layout: "gguf", "package", "safetensors", "pytorch", "folder" (or "adapted", "view").
    format: str = ""
    #: Key/value metadata (GGUF KV pairs; safetensors ``__metadata__``; empty otherwise).
    metadata: dict[str, Any] = {}  # replaced per instance; never mutate the class default
    #: Sidecar files by logical name (``config.json``, ``tokenizer.json``...) -> path on disk.
    files: dict[str, Path] = {}
    #: Where the tensors come from (file or folder), for messages.
    path: Path | None = None
    #: A package's embedded model spec (``audiocpp.model_spec.json``) and its family; None elsewhere.
    model_spec_json: str | None = None
    family: str | None = None

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

    def blocks(self, name: str) -> BlockTensor | None:
        """The tensor as stored, when it is a 2-D Q8_0 / Q4_0 matrix that a quantized kernel can
        use without dequantizing (``engine.nn.linear.quantized``); None otherwise (the default)."""
        return None

    def release(self, name: str) -> None:
        """A hint that the caller holds its own copy of ``name``: memory-mapped sources drop the
        tensor's pages from the process (re-read from the file if touched again). No-op here."""

    def release_all(self) -> None:
        """After loading: drop every page of a memory-mapped source from the process (tensors that
        still view the file read theirs back when touched). No-op here."""

    def __contains__(self, name: object) -> bool:
        return name in self._name_set()

    def _name_set(self) -> frozenset[str]:
        cached = self.__dict__.get("_cached_name_set")
        if cached is None:
            cached = frozenset(self.names())
            self.__dict__["_cached_name_set"] = cached
        return cached

    def describe(self) -> str:
        """A short label for messages: the path, or the format when there is none."""
        return str(self.path) if self.path is not None else (self.format or type(self).__name__)

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

    def namespace(self, prefix: str, sep: str = "/") -> TensorSource:
        """A view of the tensors named ``prefix<sep><name>``, addressed as ``<name>``.

        ``sep="/"`` serves audio.cpp package namespaces; ``sep="."`` selects a module
        prefix of a flat checkpoint (``audio_vae.`` in a VoxCPM.cpp GGUF).
        """
        return PrefixView(self, prefix, sep=sep)

    def state_dict(self, dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
        return {name: self.get(name, dtype) for name in self.names()}


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
                what, hint = (f"tensors named {self.prefix}*",
                              f"prefixes present: {', '.join(list(tops)[:12]) or 'none'}")
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


def unknown_tensor(source: TensorSource, name: str) -> ModelError:
    """The error for a tensor name the source does not have (with close matches)."""
    import difflib

    close = difflib.get_close_matches(name, source.names(), n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}?" if close else f"the source has {len(source)} tensors"
    return ModelError(f"{source.describe()} has no tensor {name!r}", hint=hint)


def cast(tensor: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    return tensor if dtype is None or tensor.dtype == dtype else tensor.to(dtype)


#: torch dtype -> storage name used in TensorInfo.dtype
TORCH_DTYPE_NAMES: dict[torch.dtype, str] = {
    torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
    torch.int8: "I8", torch.int16: "I16", torch.int32: "I32", torch.int64: "I64",
    torch.uint8: "U8", torch.bool: "BOOL",
    torch.float8_e4m3fn: "F8_E4M3", torch.float8_e5m2: "F8_E5M2",
}


def dtype_name(dtype: torch.dtype) -> str:
    return TORCH_DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch.").upper())


def still_whole(path: Path, needed: int) -> None:
    """The file still holds ``needed`` bytes (it may have been cut short since it was mapped)."""
    try:
        size = path.stat().st_size
    except OSError:
        size = -1
    if size < needed:
        raise ModelError(f"{path} changed while it was in use: it needs {needed} bytes but now has "
                         f"{max(size, 0)}",
                         hint="do not rewrite or truncate a model file while audiocpp reads it; load it "
                         "again")
