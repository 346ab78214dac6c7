"""The plugin API: every engine name a family package may import, from one module.

``from audiocpp.engine.plugin_api import FamilyPlugin, LoadedModel, Session, Synthesis, ...``.
These names (``__all__``, listed with what each is in ``docs/adding-a-family.md``) are stable:
within one :data:`PLUGIN_API_VERSION` a name is never removed, renamed or given an incompatible
signature; additions keep the version. Anything else under ``audiocpp.engine`` may change between
releases. ``tests/engine/test_plugin_api.py`` imports exactly this list.

Importing this module is light (no torch): a plugin's ``__init__`` may import from it. Names
whose modules need torch (the weights and ``nn`` helpers) are imported on first use (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy_exports import lazy_getattr

#: Bumped only when a name of ``__all__`` is removed or changes incompatibly.
PLUGIN_API_VERSION = 1

# name -> module (relative to audiocpp.engine) that defines it
_EXPORTS: dict[str, tuple[str, ...]] = {
    # the contract a family implements
    "plugin": ("FamilyPlugin",),
    "loaded_model": ("LoadedModel",),
    "session": ("PreparedRequest", "Session", "Synthesis"),
    "batching.ops": ("Op", "relay"),
    "progress": ("Progress",),
    # records shared by families, the CLI and the Python API
    "records": ("AudioBuffer", "AudioPiece", "Metrics", "ModelInfo", "StreamEvent", "TaskRequest",
                "TaskResult",
                "VoicePrompt", "VoiceReference", "WordTiming"),
    "voice_prompt": ("CodecPrompt",),
    "tasks": ("Mode", "Task"),
    # errors and warnings
    "errors": ("AudioError", "AudiocppError", "AudiocppWarning", "FamilyUnavailableError", "ModelError",
               "SpecError", "UsageError"),
    # specs and detection
    "spec.model_spec": ("ModelSpec", "OptionSpec"),
    "spec.canonical": ("CANONICAL_REQUEST_OPTIONS",),
    "detect": ("Evidence", "PathFacts"),
    # weights (torch on first use)
    "weights.resolve": ("ResolvedWeights", "resolve_weights"),
    "weights.open": ("open_weights",),
    "weights.source": ("TensorInfo", "TensorSource"),
    "weights.loading": ("load_module_weights",),
    "weights.adapters": ("Cast", "Drop", "FoldWeightNorm", "Fuse", "Keep", "Permute", "Rename", "Reshape",
                         "Split", "Synthesize", "Transform", "Transpose", "adapt"),
    "weights.package": ("cache_dir",),
    "nn.build": ("PerDtype", "build_on_meta", "load_on_meta"),
    "device": ("torch_dtype",),
    # packaging and text
    "packaging.plan": ("PackagePlan",),
    "text.chunking": ("chunk_text",),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "CANONICAL_REQUEST_OPTIONS", "PLUGIN_API_VERSION",
    "AudioBuffer", "AudioError", "AudioPiece", "AudiocppError", "AudiocppWarning", "Cast", "CodecPrompt",
    "Drop",
    "Evidence", "FamilyPlugin", "FamilyUnavailableError", "FoldWeightNorm", "Fuse", "Keep", "LoadedModel",
    "Metrics", "Mode", "ModelError", "ModelInfo", "ModelSpec", "Op", "OptionSpec", "PackagePlan", "PathFacts",
    "PerDtype", "Permute", "PreparedRequest", "Progress", "Rename", "Reshape", "ResolvedWeights", "Session",
    "SpecError", "Split", "StreamEvent", "Synthesis", "Synthesize", "Task", "TaskRequest", "TaskResult",
    "TensorInfo", "TensorSource", "Transform", "Transpose", "UsageError", "VoicePrompt", "VoiceReference",
    "WordTiming", "adapt", "build_on_meta", "cache_dir", "chunk_text", "load_module_weights", "load_on_meta",
    "open_weights", "relay", "resolve_weights", "torch_dtype",
]
assert sorted(__all__) == sorted([*_WHERE, "PLUGIN_API_VERSION"])


__getattr__ = lazy_getattr(__name__, __package__, _WHERE)


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # for type checkers and editors; at run time the names above load lazily
    from .batching.ops import Op, relay
    from .detect import Evidence, PathFacts
    from .device import torch_dtype
    from .errors import (
        AudiocppError,
        AudiocppWarning,
        AudioError,
        FamilyUnavailableError,
        ModelError,
        SpecError,
        UsageError,
    )
    from .loaded_model import LoadedModel
    from .nn.build import PerDtype, build_on_meta, load_on_meta
    from .packaging.plan import PackagePlan
    from .plugin import FamilyPlugin
    from .progress import Progress
    from .records import (
        AudioBuffer,
        AudioPiece,
        Metrics,
        ModelInfo,
        StreamEvent,
        TaskRequest,
        TaskResult,
        VoicePrompt,
        VoiceReference,
        WordTiming,
    )
    from .session import PreparedRequest, Session, Synthesis
    from .spec.canonical import CANONICAL_REQUEST_OPTIONS
    from .spec.model_spec import ModelSpec, OptionSpec
    from .tasks import Mode, Task
    from .text.chunking import chunk_text
    from .voice_prompt import CodecPrompt
    from .weights.adapters import (
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
        Transform,
        Transpose,
        adapt,
    )
    from .weights.loading import load_module_weights
    from .weights.open import open_weights
    from .weights.package import cache_dir
    from .weights.resolve import ResolvedWeights, resolve_weights
    from .weights.source import TensorInfo, TensorSource
