"""The plugin API (``audiocpp.engine.plugin_api``): exactly these names, version 1, the engine's own
objects, light to import, and listed in docs/adding-a-family.md. Removing or renaming one of them
means a new PLUGIN_API_VERSION; adding one means adding it here and in the docs."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import audiocpp.engine.plugin_api as api
from audiocpp.engine.plugin_api import (  # noqa: F401  - the import itself is the test: exactly these names
    CANONICAL_REQUEST_OPTIONS,
    PLUGIN_API_VERSION,
    AudioBuffer,
    AudiocppError,
    AudiocppWarning,
    AudioError,
    Cast,
    CodecPrompt,
    Drop,
    Evidence,
    FamilyPlugin,
    FamilyUnavailableError,
    FoldWeightNorm,
    Fuse,
    Keep,
    LoadedModel,
    Metrics,
    Mode,
    ModelError,
    ModelInfo,
    ModelSpec,
    Op,
    OptionSpec,
    PackagePlan,
    PathFacts,
    PerDtype,
    Permute,
    PreparedRequest,
    Progress,
    Rename,
    Reshape,
    ResolvedWeights,
    Session,
    SpecError,
    Split,
    StreamEvent,
    Synthesis,
    Synthesize,
    Task,
    TaskRequest,
    TaskResult,
    TensorInfo,
    TensorSource,
    Transform,
    Transpose,
    UsageError,
    VoicePrompt,
    VoiceReference,
    adapt,
    build_on_meta,
    cache_dir,
    chunk_text,
    load_module_weights,
    load_on_meta,
    open_weights,
    relay,
    resolve_weights,
    torch_dtype,
)

V1 = {
    "CANONICAL_REQUEST_OPTIONS", "PLUGIN_API_VERSION", "AudioBuffer", "AudioPiece", "AudiocppError",
    "AudiocppWarning", "WordTiming",
    "AudioError", "Cast", "CodecPrompt", "Drop", "Evidence", "FamilyPlugin", "FamilyUnavailableError",
    "FoldWeightNorm", "Fuse", "Keep", "LoadedModel", "Metrics", "Mode", "ModelError", "ModelInfo",
    "ModelSpec", "Op", "OptionSpec", "PackagePlan", "PathFacts", "PerDtype", "Permute", "PreparedRequest",
    "Progress", "Rename", "Reshape", "ResolvedWeights", "Session", "SpecError", "Split", "StreamEvent",
    "Synthesis", "Synthesize", "Task", "TaskRequest", "TaskResult", "TensorInfo", "TensorSource", "Transform",
    "Transpose", "UsageError", "VoicePrompt", "VoiceReference", "adapt", "build_on_meta", "cache_dir",
    "chunk_text", "load_module_weights", "load_on_meta", "open_weights", "relay", "resolve_weights",
    "torch_dtype",
}
DOCS = Path(__file__).resolve().parents[2] / "docs" / "adding-a-family.md"


def test_version_1_is_exactly_this_list() -> None:
    assert PLUGIN_API_VERSION == 1
    assert set(api.__all__) == V1 and len(api.__all__) == len(V1)
    assert set(dir(api)) >= V1


def test_every_name_is_the_engines_own_object() -> None:
    for name, module in api._WHERE.items():
        home = importlib.import_module(f"audiocpp.engine.{module}")
        assert getattr(api, name) is getattr(home, name), name
    assert (FamilyPlugin.__module__ == "audiocpp.engine.plugin"
            and Synthesis.__module__ == "audiocpp.engine.records")


def test_importing_it_does_not_import_torch() -> None:
    code = ("import sys; from audiocpp.engine.plugin_api import FamilyPlugin, ModelError, ModelSpec, "
            "PLUGIN_API_VERSION; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_docs_list_the_same_names() -> None:
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("## The plugin API", 1)[1].split("\n## ", 1)[0]
    documented = set()
    for line in section.splitlines():
        if line.startswith("| ") and not line.startswith("| name") and not line.startswith("|---"):
            documented.update(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)(?:\([^`]*\))?`", line.split(" | ")[0]))
    assert documented == V1, (sorted(V1 - documented), sorted(documented - V1))
