"""What goes into a package: namespaces of tensors, sidecar files, the spec.

``plan_from_spec(spec, inputs)`` is the default, spec-driven planner. ``inputs`` maps a
namespace to a path (``weights=model.safetensors``), and/or the key ``""``
(:data:`MODEL_INPUT`) to one model folder or file:

- a folder is mapped through the spec's non-GGUF ``sources`` (the first whose tensor files
  all exist): each tensor reference ``root:rel`` fills its namespace, each file reference
  becomes an embedded sidecar under the name the spec's package source gives it;
- a package GGUF is re-encoded: its namespaces and embedded files are carried over.

Explicit ``ns=PATH`` inputs add or replace namespaces. ``PATH`` may be a weights file or a
folder; for a folder the spec's source reference for ``ns`` picks the file inside it. When
there is no model input, sidecars are looked up beside the first explicit input.
Families override ``FamilyPlugin.package_plan`` to return their own :class:`PackagePlan`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import ModelError, SpecError, UsageError
from ..spec.model_spec import ModelSpec, Source, TensorPrefix
from ..weights.source import TensorSource

MODEL_INPUT = ""
MAX_EMBEDDED_FILE = 64 * 1024 * 1024  # audio.cpp's per-file limit


@dataclass
class PackagePlan:
    """Everything the writer needs; validated against the spec before anything is written."""

    family: str
    namespaces: dict[str, TensorSource]
    files: dict[str, Path | bytes] = field(default_factory=dict)
    spec: ModelSpec | None = None
    spec_json: str | None = None  # embedded verbatim; derived from ``spec`` when None
    source_paths: dict[str, str] = field(default_factory=dict)  # namespace -> input path
    name: str = ""  # general.name (the model folder's name)
    source_format: str = ""  # input extension (".safetensors"), "folder", or "packed" for several inputs
    metadata: dict[str, Any] = field(default_factory=dict)  # extra GGUF KV pairs

    def spec_text(self) -> str | None:
        if self.spec_json is not None:
            return self.spec_json
        if self.spec is None:
            return None
        return json.dumps(self.spec.model_dump(mode="json", by_alias=True, exclude_unset=True), indent=2)


# -- the spec's package layout ------------------------------------------------------------
def package_source(spec: ModelSpec) -> Source:
    """The spec's package GGUF source: a GGUF source whose tensors are all namespaces."""
    candidates = [s for s in spec.sources if s.format == "gguf" and s.tensors
                  and all(isinstance(r, TensorPrefix) for r in s.tensors.values())]
    for src in candidates:
        if src.id == "package":
            return src
    if candidates:
        return candidates[0]
    raise SpecError(
        f"the {spec.family} spec declares no package GGUF source",
        hint="add a sources[] entry of format 'gguf' whose tensors are {source: 'package:', prefix: ns}",
    )


def _ref_path(ref: str) -> str:
    return ref.split(":", 1)[1] if ":" in ref else ref


def package_namespaces(spec: ModelSpec) -> tuple[list[str], list[str]]:
    """(required, optional) namespace names of the package source."""
    src = package_source(spec)

    def ns(key: str, ref: str | TensorPrefix) -> str:
        return ref.prefix if isinstance(ref, TensorPrefix) else key

    return ([ns(k, r) for k, r in src.tensors.items()], [ns(k, r) for k, r in src.optional_tensors.items()])


def package_files(spec: ModelSpec) -> tuple[dict[str, str], dict[str, str]]:
    """(required, optional) sidecar files of the package source: file id -> embedded name."""
    src = package_source(spec)
    return ({k: _ref_path(r) for k, r in src.files.items()},
            {k: _ref_path(r) for k, r in src.optional_files.items()})


# -- validation ---------------------------------------------------------------------------
def validate_plan(plan: PackagePlan, spec: ModelSpec | None = None) -> None:
    """Raise before writing when the plan lacks a namespace or sidecar the spec requires."""
    spec = spec or plan.spec
    for name, data in plan.files.items():
        _check_file_name(name)
        size = len(data) if isinstance(data, bytes) else _file_size(data, name)
        if size > MAX_EMBEDDED_FILE:
            raise ModelError(f"sidecar {name!r} is {size} bytes; embedded files are limited to 64 MiB",
                             hint="leave large files out of the package")
    for ns, source in plan.namespaces.items():
        if not ns or "/" in ns:
            raise UsageError(f"namespace {ns!r} is not a valid name (non-empty, no '/')")
        if len(source) == 0:
            raise ModelError(f"the input for namespace {ns!r} holds no tensors", hint=_where(plan, ns))
    if spec is None:
        if not plan.namespaces:
            raise UsageError("nothing to package: no tensor namespaces")
        return
    required, optional = package_namespaces(spec)
    missing = [ns for ns in required if ns not in plan.namespaces]
    if missing:
        raise UsageError(
            f"the {spec.family} package needs namespace(s) {', '.join(missing)}, which no input provides",
            hint=f"pass --input NS=PATH for each (the spec's namespaces: {', '.join(required + optional)}), "
                 "or --input MODEL_FOLDER",
        )
    unknown = [ns for ns in plan.namespaces if ns not in required and ns not in optional]
    if unknown:
        raise UsageError(
            f"namespace(s) {', '.join(unknown)} are not part of the {spec.family} package",
            hint=f"the spec's namespaces are {', '.join(required + optional)}",
        )
    req_files, _ = package_files(spec)
    absent = [name for name in req_files.values() if name not in plan.files]
    if absent:
        raise ModelError(
            f"the {spec.family} package needs sidecar file(s) {', '.join(absent)}, which the inputs lack",
            hint="pass the model folder that holds them (--input FOLDER), or put them beside the first input",
        )


def _check_file_name(name: str) -> None:
    pure = PurePosixPath(name)
    if not name or pure.is_absolute() or ".." in pure.parts or "\\" in name or name != pure.as_posix():
        raise UsageError(f"embedded file name {name!r} must be a relative POSIX path without '..'")


def _file_size(path: Path, name: str) -> int:
    try:
        return path.stat().st_size
    except OSError as exc:
        raise ModelError(f"sidecar {name!r} ({path}) cannot be read: {exc.strerror or exc}") from None


def _where(plan: PackagePlan, ns: str) -> str:
    src = plan.source_paths.get(ns)
    return f"check {src}" if src else "check the input path"


# -- the default planner --------------------------------------------------------------------
def plan_from_spec(spec: ModelSpec, inputs: dict[str, Path], *, spec_json: str | None = None) -> PackagePlan:
    """A plan from ``inputs`` (namespace -> path, ``""`` -> model folder/file) and the spec."""
    from ..weights.open import open_weights

    inputs = {k: Path(v).expanduser() for k, v in inputs.items()}
    for key, path in inputs.items():
        if not path.exists():
            label = "model input" if key == MODEL_INPUT else f"input {key}"
            raise UsageError(f"{label} {str(path)!r} does not exist", hint="check the --input path")
    namespaces: dict[str, TensorSource] = {}
    files: dict[str, Path | bytes] = {}
    paths: dict[str, Path] = {}
    root: Path | None = None
    model = inputs.get(MODEL_INPUT)
    if model is not None:
        root = model if model.is_dir() else model.parent
        if model.is_dir():
            src = _pick_folder_source(spec, model, explicit=set(inputs) - {MODEL_INPUT})
            ns_paths, files = _map_folder(spec, src, model)
            for ns, path in ns_paths.items():
                namespaces[ns], paths[ns] = open_weights(path), path
        else:
            _take_file(spec, model, open_weights(model), namespaces, files, paths,
                       explicit=set(inputs) - {MODEL_INPUT})
    for ns, path in inputs.items():
        if ns == MODEL_INPUT:
            continue
        target = _namespace_file(spec, ns, path) if path.is_dir() else path
        source = open_weights(target)
        if _is_package(source):
            if ns not in source.namespaces():
                raise UsageError(f"package {path} has no namespace {ns!r}",
                                 hint=f"its namespaces: {', '.join(source.namespaces()) or 'none'}")
            source = source.namespace(ns)
        namespaces[ns], paths[ns] = source, target
    if model is None and inputs:
        first = next(iter(inputs.values()))
        root = first if first.is_dir() else first.parent
        files = _sidecars_near(spec, root, first)
    name = root.resolve().name if root is not None else spec.family
    if model is not None and model.is_dir() and len(inputs) == 1:
        source_format = "folder"  # one model folder, whatever files its namespaces come from
    else:
        source_format = _source_format(list(paths.values()))
    return PackagePlan(
        family=spec.family, namespaces=namespaces, files=files, spec=spec, spec_json=spec_json,
        source_paths={ns: _relative(p, root) for ns, p in paths.items()}, name=name,
        source_format=source_format,
    )


def _is_package(source: TensorSource) -> bool:
    return getattr(source, "format", "") == "package"


def _folder_sources(spec: ModelSpec) -> list[Source]:
    return [s for s in spec.sources
            if s.format != "gguf" and all(not v.startswith("$") for v in s.roots.values())]


def _resolve(src: Source, folder: Path, ref: str) -> Path:
    """The path a ``root:rel`` reference names under ``folder``, trying the equivalents the
    loaders accept (a sharded ``.index.json``; ``.safetensors`` beside a ``.pth``/``.bin``)."""
    root_id, _, rel = ref.partition(":")
    base = folder / src.roots.get(root_id, ".")
    if not rel:
        return base
    candidates = [rel]
    if rel.endswith(".safetensors"):
        candidates.append(rel + ".index.json")
    for suffix in (".pth", ".bin", ".pt"):
        if rel.endswith(suffix):
            candidates += [rel + ".index.json", rel[: -len(suffix)] + ".safetensors"]
    for candidate in candidates:
        if (base / candidate).is_file():
            return base / candidate
    return base / rel


def _pick_folder_source(spec: ModelSpec, folder: Path, explicit: set[str]) -> Source:
    candidates = _folder_sources(spec)
    if not candidates:
        raise SpecError(f"the {spec.family} spec has no non-GGUF source to map a model folder",
                        hint="pass each namespace as --input NS=PATH")
    problems = []
    for src in candidates:
        missing = [f"{ns} ({_ref_text(ref)})" for ns, ref in src.tensors.items()
                   if ns not in explicit and not _resolve(src, folder, _ref_text(ref)).exists()]
        if not missing:
            return src
        problems.append(f"{src.id or src.format}: missing {', '.join(missing)}")
    raise ModelError(
        f"{folder} does not hold a {spec.family} model: {'; '.join(problems)}",
        hint="pass the model folder, or give the missing namespaces as --input NS=PATH",
    )


def _ref_text(ref: str | TensorPrefix) -> str:
    return ref.source if isinstance(ref, TensorPrefix) else ref


def _map_folder(spec: ModelSpec, src: Source,
                folder: Path) -> tuple[dict[str, Path], dict[str, Path | bytes]]:
    ns_paths = {}
    for ns, ref in {**src.tensors, **src.optional_tensors}.items():
        path = _resolve(src, folder, _ref_text(ref))
        if path.exists():
            ns_paths[ns] = path
    return ns_paths, _sidecars(spec, src, folder)


def _sidecars(spec: ModelSpec, src: Source, folder: Path) -> dict[str, Path | bytes]:
    """Sidecar files of ``src`` under ``folder``, named as the package source names them."""
    req_names, opt_names = package_files(spec)
    out: dict[str, Path | bytes] = {}
    for group, names in ((src.files, req_names), (src.optional_files, opt_names)):
        for file_id, ref in group.items():
            path = _resolve(src, folder, ref)
            if path.is_file():
                out[names.get(file_id, _ref_path(ref))] = path
    return out


def _sidecars_near(spec: ModelSpec, root: Path, first: Path) -> dict[str, Path | bytes]:
    from ..weights.open import open_weights

    if first.is_file() and first.suffix.lower() == ".gguf":
        source = open_weights(first)
        if _is_package(source):
            return {name: source.embedded_bytes(name) for name in source.embedded_file_names()}
    best: dict[str, Path | bytes] = {}
    for src in _folder_sources(spec):
        found = _sidecars(spec, src, root)
        if len(found) > len(best):
            best = found
    return best


def _namespace_file(spec: ModelSpec, ns: str, folder: Path) -> Path:
    """The file the spec's folder sources name for ``ns`` inside ``folder`` (else the folder)."""
    for src in _folder_sources(spec):
        ref = {**src.tensors, **src.optional_tensors}.get(ns)
        if ref is not None:
            path = _resolve(src, folder, _ref_text(ref))
            if path.exists():
                return path
    return folder


def _take_file(spec: ModelSpec, path: Path, source: TensorSource, namespaces: dict[str, TensorSource],
               files: dict[str, Path | bytes], paths: dict[str, Path], explicit: set[str]) -> None:
    """A single model file: a package GGUF (re-encode) or one weights file for a one-namespace spec."""
    if _is_package(source):
        for ns in source.namespaces():
            namespaces[ns], paths[ns] = source.namespace(ns), path
        files.update({name: source.embedded_bytes(name) for name in source.embedded_file_names()})
        return
    required, _ = package_namespaces(spec)
    left = [ns for ns in required if ns not in explicit]
    if len(left) != 1:
        raise UsageError(
            f"{path} is a single weights file, but the {spec.family} package has namespaces "
            f"{', '.join(required)}",
            hint="pass the model folder, or each namespace as --input NS=PATH",
        )
    namespaces[left[0]], paths[left[0]] = source, path
    files.update(_sidecars_near(spec, path.parent, path))


def _relative(path: Path, root: Path | None) -> str:
    if root is not None:
        try:
            return path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            pass
    return path.resolve().as_posix()


def _source_format(paths: list[Path]) -> str:
    unique = {p.resolve() for p in paths}
    if len(unique) == 1:
        path = next(iter(unique))
        return path.suffix.lower() if path.is_file() else "folder"
    return "packed"
