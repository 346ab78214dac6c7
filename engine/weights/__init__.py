"""Weights: TensorSources over every supported storage, tensor adapters, strict loading,
and spec-driven resolution (``resolve_weights``).

Names are imported lazily (PEP 562), so ``audiocpp.engine.weights.gguf_file`` (used by
family detection and ``audiocpp families``) does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_exports import lazy_getattr

_EXPORTS = {
    "adapters": (
        "AdaptedSource", "Cast", "Drop", "FoldWeightNorm", "Fuse", "Keep", "TensorOp", "Permute", "Rename",
        "Reshape", "Split", "Synthesize", "Transform", "Transpose", "adapt", "full", "identity", "ones",
        "zeros",
    ),
    "folder": ("FolderSource",),
    "gguf_file": ("GGUFFile", "is_gguf", "read_gguf_metadata"),
    "gguf_source": ("GGUFSource",),
    "loading": ("check_module_weights", "load_module_weights"),
    "open": ("open_weights",),
    "package": ("PackageSource", "cache_dir", "is_package"),
    "resolve": ("ResolvedWeights", "resolve_weights"),
    "safetensors_source": ("SafetensorsSource", "ShardedSource"),
    "source": ("PrefixView", "TensorInfo", "TensorSource"),
    "torch_source": ("TorchSource",),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = [
    "AdaptedSource", "Cast", "Drop", "FoldWeightNorm", "FolderSource", "Fuse", "GGUFFile", "GGUFSource",
    "Keep", "TensorOp", "PackageSource", "Permute", "PrefixView", "Rename", "Reshape", "ResolvedWeights",
    "SafetensorsSource", "ShardedSource", "Split", "Synthesize", "TensorInfo", "TensorSource",
    "TorchSource", "Transform", "Transpose", "adapt", "cache_dir", "check_module_weights", "full",
    "identity", "is_gguf", "is_package", "load_module_weights", "ones", "open_weights",
    "read_gguf_metadata", "resolve_weights", "zeros",
]
assert sorted(__all__) == sorted(_WHERE)


__getattr__ = lazy_getattr(__name__, __name__, _WHERE)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from .adapters import (
        AdaptedSource,
        Cast,
        Drop,
        FoldWeightNorm,
        Fuse,
        Keep,
        Permute,
        Rename,
        Reshape,
        Split,
        Synthesize,
        TensorOp,
        Transform,
        Transpose,
        adapt,
        full,
        identity,
        ones,
        zeros,
    )
    from .folder import FolderSource
    from .gguf_file import GGUFFile, is_gguf, read_gguf_metadata
    from .gguf_source import GGUFSource
    from .loading import check_module_weights, load_module_weights
    from .open import open_weights
    from .package import PackageSource, cache_dir, is_package
    from .resolve import ResolvedWeights, resolve_weights
    from .safetensors_source import SafetensorsSource, ShardedSource
    from .source import PrefixView, TensorInfo, TensorSource
    from .torch_source import TorchSource
