"""Spec-driven weight resolution: one TensorSource per namespace plus the sidecar files.

A spec's ``sources[]`` entry names its roots, files and tensors:

- roots: ``"."`` is the model folder, ``"$gguf"`` the GGUF file given as the model path
  (or ``model.gguf`` inside the folder); any other ``"$name"`` comes from ``extra_roots``
  (``{"$codec": path}``; the key may be written without ``$``). A source with a root that
  cannot be resolved is not eligible.
- files: ``"root:rel/path"``. In a folder root it is a file on disk; in a GGUF root it is an
  embedded file of the package. ``optional_files`` may be absent.
- tensors: ``"root:rel"`` opens the checkpoint at ``rel`` (a ``.safetensors`` also accepts its
  sharded ``.index.json``; a ``.pth``/``.bin`` also accepts ``.safetensors`` beside it and a
  sharded ``pytorch_model.bin.index.json``); ``"root:"`` is the root itself (the whole GGUF).
  ``{"source": "root:rel", "prefix": "ns"}`` is the namespace ``ns`` of that checkpoint:
  ``ns/<name>`` in a package GGUF, or, in a flat checkpoint (plain GGUF, safetensors), the
  tensors named ``ns.<name>`` with ``ns.`` stripped. A whole-file namespace of a file that
  sibling namespaces take prefixes from excludes those prefixed tensors (VoxCPM.cpp: the LM
  is everything but ``audio_vae.*``).

The first source (in spec order) whose roots, required files and tensors are all present is
chosen, except that a package GGUF prefers the source with id ``package``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ModelError
from ..spec.model_spec import ModelSpec, Source, TensorPrefix
from .adapters import Drop
from .folder import root_checkpoint
from .gguf_file import is_gguf
from .open import open_weights
from .source import TensorSource


@dataclass
class ResolvedWeights:
    """The weights of one model path, as a spec source describes them."""

    source_id: str
    format: str  # the spec source's format ("safetensors", "pytorch", "gguf")
    namespaces: dict[str, TensorSource]
    files: dict[str, Path]  # by spec file id and by relative name ("config", "config.json")
    metadata: dict[str, Any]
    path: Path
    layout: str = ""  # storage of the model path: "package", "gguf" or "folder"
    model_spec_json: str | None = None  # the package's embedded spec, if any
    family: str | None = None  # the package's embedded spec family, if any
    main: TensorSource | None = field(default=None, repr=False)  # the source opened from the path itself

    def namespace(self, name: str) -> TensorSource:
        source = self.namespaces.get(name)
        if source is None:
            raise ModelError(f"{self.path} has no {name!r} weights (source {self.source_id!r})",
                             hint=f"namespaces present: {', '.join(self.namespaces) or 'none'}")
        return source

    def file(self, key: str) -> Path:
        path = self.files.get(key)
        if path is None:
            raise ModelError(f"{self.path} has no {key!r} file",
                             hint=f"files present: {', '.join(self.files)}")
        return path


class _Unfit(Exception):
    """This spec source does not fit; ``problems`` says why."""

    def __init__(self, problems: list[str], eligible: bool = True, needs_root: bool = False) -> None:
        super().__init__("; ".join(problems))
        self.problems, self.eligible, self.needs_root = problems, eligible, needs_root


def _split_ref(ref: str) -> tuple[str, str]:
    root, sep, rel = ref.partition(":")
    if not sep:
        raise ModelError(f"spec reference {ref!r} is not of the form 'root:path'")
    return root, rel


def _alternatives(rel: str) -> list[str]:
    """``rel`` plus the equivalent files upstream loaders also accept."""
    out = [rel]
    if rel.endswith(".safetensors"):
        out.append(rel + ".index.json")
    for suffix in (".pth", ".bin", ".pt"):
        if rel.endswith(suffix):
            out.append(rel + ".index.json")
            out.append(rel[: -len(suffix)] + ".safetensors")
    return out


class _Resolver:
    def __init__(self, spec: ModelSpec, path: Path, extra_roots: dict[str, Path]) -> None:
        self.spec, self.path = spec, path
        self.extra = {(k if k.startswith("$") else f"${k}"): Path(v) for k, v in extra_roots.items()}
        self.gguf: Path | None = None
        self.folder: Path | None = None
        if path.is_dir():
            inner = path / "model.gguf"
            if root_checkpoint(path) is None and inner.is_file():
                self.gguf = inner
            self.folder = path
        elif is_gguf(path) or path.suffix.lower() == ".gguf":
            self.gguf = path
        self._opened: dict[Path, TensorSource] = {}

    def open(self, path: Path) -> TensorSource:
        key = path.resolve()
        if key not in self._opened:
            self._opened[key] = open_weights(path)
        return self._opened[key]

    @property
    def layout(self) -> str:
        if self.gguf is not None:
            return self.open(self.gguf).format
        return "folder"

    def root(self, source: Source, root_id: str) -> Path:
        spec = source.roots.get(root_id)
        if spec is None:
            raise _Unfit([f"reference to undeclared root {root_id!r}"], eligible=False)
        if spec == ".":
            if self.folder is None:
                raise _Unfit([f"root {root_id!r} is a folder, the path is a file"], eligible=False)
            return self.folder
        if spec == "$gguf":
            if self.gguf is None:
                raise _Unfit([f"root {root_id!r} is a GGUF file"], eligible=False)
            return self.gguf
        if spec in self.extra:
            return self.extra[spec]
        raise _Unfit([f"needs {spec} (its other file, e.g. the --codec path)"], eligible=False,
                     needs_root=True)

    def resolve(self, source: Source) -> ResolvedWeights:
        for root_id in source.roots:
            self.root(source, root_id)
        problems: list[str] = []
        files: dict[str, Path] = {}
        for optional, table in ((False, source.files), (True, source.optional_files)):
            for key, ref in table.items():
                found = self.file(source, ref)
                if found is None:
                    if not optional:
                        problems.append(f"file {_split_ref(ref)[1]!r} ({key})")
                    continue
                files[key] = found
                files.setdefault(_split_ref(ref)[1], found)
        namespaces: dict[str, TensorSource] = {}
        whole: dict[str, Path] = {}
        prefixes: dict[Path, list[str]] = {}
        for optional, table in ((False, source.tensors), (True, source.optional_tensors)):
            for ns, ref in table.items():
                try:
                    view, target, prefix = self.tensors(source, ref)
                except _Unfit as unfit:
                    if not optional:
                        problems.extend(f"{p} ({ns})" for p in unfit.problems)
                    continue
                namespaces[ns] = view
                if prefix is None:
                    whole[ns] = target
                else:
                    prefixes.setdefault(target, []).append(prefix)
        if problems:
            raise _Unfit(problems)
        for ns, target in whole.items():
            taken = prefixes.get(target)
            if taken and namespaces[ns].format != "package":
                namespaces[ns] = Drop(*(f"{p}.*" for p in taken)).apply(namespaces[ns])
        main = self.open(self.gguf) if self.gguf is not None else None
        if main is not None:
            for name, file in main.files.items():
                files.setdefault(name, file)
        elif self.folder is not None:
            from .folder import sidecar_files

            for name, file in sidecar_files(self.folder).items():
                files.setdefault(name, file)
        return ResolvedWeights(
            source_id=source.id or source.format, format=source.format, namespaces=namespaces, files=files,
            metadata=dict(main.metadata) if main is not None else {}, path=self.path, layout=self.layout,
            model_spec_json=main.model_spec_json if main is not None else None,
            family=main.family if main is not None else None,
            main=main,
        )

    def file(self, source: Source, ref: str) -> Path | None:
        root_id, rel = _split_ref(ref)
        root = self.root(source, root_id)
        if root.is_dir():
            candidate = root / rel
            return candidate if candidate.is_file() else None
        return self.open(root).files.get(rel)

    def tensors(self, source: Source, ref: str | TensorPrefix) -> tuple[TensorSource, Path, str | None]:
        prefix = ref.prefix if isinstance(ref, TensorPrefix) else None
        root_id, rel = _split_ref(ref.source if isinstance(ref, TensorPrefix) else ref)
        root = self.root(source, root_id)
        target = root
        if rel:
            if not root.is_dir():
                raise _Unfit([f"{rel!r} inside the file {root.name}"])
            for alt in _alternatives(rel):
                if (root / alt).is_file():
                    target = root / alt
                    break
            else:
                raise _Unfit([f"weights file {rel!r}"])
        elif not target.exists():
            raise _Unfit([f"weights {str(target)!r}"])
        opened = self.open(target)
        if prefix is None:
            return opened, target, None
        names = opened.names()
        for sep in ("/", "."):
            if any(n.startswith(prefix + sep) for n in names):
                return opened.namespace(prefix, sep=sep), target, prefix
        raise _Unfit([f"namespace {prefix!r} in {target.name}"])


def resolve_weights(spec: ModelSpec, path: str | Path,
                    extra_roots: dict[str, Path] | None = None) -> ResolvedWeights:
    """Pick the ``spec.sources`` entry that fits ``path`` and open its namespaces and files."""
    path = Path(path).expanduser()
    if not path.exists():
        raise ModelError(f"model path {str(path)!r} does not exist", hint="check the --model path")
    resolver = _Resolver(spec, path, extra_roots or {})
    if resolver.gguf is None and resolver.folder is None:
        raise ModelError(
            f"{path} is neither a GGUF file nor a model folder",
            hint=f"pass the {spec.display_name} snapshot folder or a .gguf package",
        )
    fits: list[ResolvedWeights] = []
    failures: list[tuple[Source, _Unfit]] = []
    for source in spec.sources:
        try:
            fits.append(resolver.resolve(source))
        except _Unfit as unfit:
            failures.append((source, unfit))
    if fits:
        if resolver.layout == "package":
            for fit in fits:
                if fit.source_id == "package":
                    return fit
        return fits[0]
    needs_root = [(s, u) for s, u in failures if u.needs_root]
    if needs_root and resolver.layout == "gguf":
        # A plain GGUF that a multi-file layout (omnivoice.cpp's LM + codec) fits but for its other file.
        source, unfit = needs_root[0]
        raise ModelError(
            f"{path} is a {source.id or source.format!r} GGUF, which {unfit.problems[0]}",
            hint="pass the other file of this layout (the CLI option --codec / load option codec)",
        )
    eligible = [(s, u) for s, u in failures if u.eligible]
    extra = "".join(f"; layout {s.id!r} {u.problems[0]}" for s, u in needs_root)
    if eligible:
        source, unfit = min(eligible, key=lambda su: len(su[1].problems))
        missing = ", ".join(unfit.problems[:10]) + (f" and {len(unfit.problems) - 10} more"
                                                     if len(unfit.problems) > 10 else "")
        raise ModelError(
            f"{path} does not hold a complete {spec.display_name} model "
            f"(layout {source.id or source.format!r}): missing {missing}",
            hint="download the complete snapshot (or re-create the package); the spec "
            f"{spec.origin} lists what each layout needs{extra}",
        )
    reasons = "; ".join(f"{s.id or s.format}: {u.problems[0]}" for s, u in failures)
    raise ModelError(
        f"{path} matches none of the {spec.display_name} layouts ({reasons})",
        hint="pass a model folder or GGUF package of this family (and --codec where the layout needs one)",
    )
