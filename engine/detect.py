"""Spec-driven family detection: which family's files is this path?

Evidence, strongest first: a package GGUF's embedded spec family; GGUF
``general.architecture`` or identifying metadata keys; ``config.json`` ``model_type`` or
``architecture(s)``; the files a folder holds. Each family's spec lists its markers in
``detection``; the engine needs no family code to decide.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import fs
from .errors import ModelError
from .spec.model_spec import ModelSpec
from .weights.gguf_file import GGUFFile, is_gguf

EMBEDDED_FAMILY_KEY = "audiocpp.model_spec.family"

# Evidence strength: higher wins.
STRENGTH_EMBEDDED = 100
STRENGTH_GGUF_KEY = 60
STRENGTH_GGUF_ARCH = 50
STRENGTH_CONFIG = 40
STRENGTH_FILES = 10


@dataclass(frozen=True)
class Evidence:
    family: str
    strength: int
    reason: str


@dataclass
class PathFacts:
    """What detection reads from a path, read once and shared by every family."""

    path: Path
    gguf_metadata: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    folder: Path | None = None

    @property
    def embedded_family(self) -> str | None:
        """The family a package GGUF's embedded spec names (``audiocpp.model_spec.family``), or None."""
        value = (self.gguf_metadata or {}).get(EMBEDDED_FAMILY_KEY)
        return value if isinstance(value, str) and value else None

    @classmethod
    def read(cls, path: str | Path) -> PathFacts:
        path = Path(path)
        if not fs.exists(path):
            raise ModelError(f"model path {str(path)!r} does not exist", hint="check the --model path")
        facts = cls(path=path)
        target = path
        if fs.is_dir(path):
            facts.folder = path
            inner = path / "model.gguf"
            if inner.is_file():
                target = inner
        if is_gguf(target):
            facts.gguf_metadata = GGUFFile(target).metadata
        elif path.is_file() and path.suffix == ".gguf":
            # Let GGUFFile raise its precise message (wrong magic, too short).
            GGUFFile(path)
        config_path = (facts.folder or path.parent) / "config.json"
        if config_path.is_file():
            try:
                config = json.loads(config_path.read_text(encoding="utf-8"))
            except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, huge ints
                raise ModelError(f"{config_path} is not valid JSON: {str(exc)[:200]}") from None
            except OSError as exc:
                raise ModelError(f"{config_path} cannot be read: {exc.strerror or exc}") from None
            if not isinstance(config, dict):
                raise ModelError(f"{config_path} is not a JSON object",
                                 hint="a model's config.json holds an object")
            facts.config = config
        return facts


def spec_evidence(spec: ModelSpec, facts: PathFacts) -> Evidence | None:
    """The strongest reason to believe ``facts`` belong to ``spec.family`` (or None)."""
    det = spec.detection
    meta = facts.gguf_metadata
    if meta is not None:
        embedded = meta.get(EMBEDDED_FAMILY_KEY)
        if isinstance(embedded, str):
            if embedded == spec.family:
                return Evidence(spec.family, STRENGTH_EMBEDDED,
                                f"GGUF embeds a model spec for family {embedded!r}")
            return None
        for key in det.gguf_metadata_keys:
            if key in meta:
                return Evidence(spec.family, STRENGTH_GGUF_KEY, f"GGUF has metadata key {key!r}")
        arch = meta.get("general.architecture")
        if isinstance(arch, str) and arch in det.gguf_architectures:
            return Evidence(spec.family, STRENGTH_GGUF_ARCH, f"GGUF general.architecture is {arch!r}")
        return None
    config = facts.config
    if facts.folder is not None and config is not None:
        model_type = config.get("model_type")
        if isinstance(model_type, str) and model_type in det.config_model_types:
            return Evidence(spec.family, STRENGTH_CONFIG, f"config.json model_type is {model_type!r}")
        archs = config.get("architectures") or []
        if isinstance(archs, str):
            archs = [archs]
        elif not isinstance(archs, list):
            archs = []
        arch = config.get("architecture")
        if isinstance(arch, str):
            archs = [*archs, arch]
        for value in archs:
            if isinstance(value, str) and value.lower() in {a.lower() for a in det.config_architectures}:
                return Evidence(spec.family, STRENGTH_CONFIG, f"config.json architecture is {value!r}")
    if (
        facts.folder is not None
        and det.required_files
        and all((facts.folder / rel).exists() for rel in det.required_files)
    ):
        return Evidence(spec.family, STRENGTH_FILES, f"folder holds {', '.join(det.required_files)}")
    return None
