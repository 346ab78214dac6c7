"""Write a :class:`PackagePlan` as an audio.cpp-layout package GGUF.

Layout (see docs/gguf-format.md): ``general.architecture="audiocpp"``, the embedded spec,
input paths, sidecar files as one byte blob, logical tensor names ``ns/name`` with exact
PyTorch shapes, physical names aliased to ``_audiocpp.<i>`` when too long or duplicated.
Every tensor's type and byte size are decided first, then the header is written and the
tensors are converted and streamed one at a time into a temporary file that replaces the
output only when everything succeeded.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFValueType

from ..errors import ModelError, UsageError
from ..progress import NullProgress, Progress
from ..weights.source import TensorSource
from .encode import encode_tensor, physical_ne
from .gguf_writer import KV, GGUFStreamWriter, TensorEntry, atomic_output, kv_of
from .plan import PackagePlan, package_namespaces, validate_plan
from .policy import Decision, KeepRule, QuantizationPolicy, parse_weight_type, type_name

GGML_MAX_NAME = 64
ARCHITECTURE = "audiocpp"
KEY_SPEC_VERSION = "audiocpp.model_spec.version"
KEY_SPEC_FAMILY = "audiocpp.model_spec.family"
KEY_SPEC_JSON = "audiocpp.model_spec.json"
KEY_FILE_NAMES = "audiocpp.embedded_files.names"
KEY_FILE_OFFSETS = "audiocpp.embedded_files.offsets"
KEY_FILE_DATA = "audiocpp.embedded_files.data"
KEY_NAMES = "audiocpp.tensor_names"
KEY_RANKS = "audiocpp.tensor_ranks"
KEY_SHAPES = "audiocpp.tensor_shapes"
KEY_NAME_FORMAT = "audiocpp.tensor_name_format"
KEY_SOURCE_FORMAT = "audiocpp.source_format"
KEY_WEIGHT_TYPE = "audiocpp.weight_type"
KEY_SOURCE_NAMES = "audiocpp.tensor_sources.names"
KEY_SOURCE_PATHS = "audiocpp.tensor_sources.paths"
S, A = GGUFValueType.STRING, GGUFValueType.ARRAY


@dataclass(frozen=True)
class WrittenTensor:
    decision: Decision
    physical_name: str
    nbytes: int


@dataclass
class PackageSummary:
    """What was written, tensor by tensor, and how long it took."""

    path: Path
    weight_type: str
    tensors: list[WrittenTensor] = field(default_factory=list)
    embedded_files: dict[str, int] = field(default_factory=dict)  # name -> bytes
    file_size: int = 0
    seconds: float = 0.0

    def by_type(self) -> dict[str, tuple[int, int]]:
        """ggml type name -> (tensor count, bytes)."""
        out: dict[str, tuple[int, int]] = {}
        for t in self.tensors:
            key = t.decision.ggml_type.name
            n, b = out.get(key, (0, 0))
            out[key] = (n + 1, b + t.nbytes)
        return dict(sorted(out.items()))

    def by_decision(self) -> list[tuple[str, str, int, int]]:
        """(type, reason, count, bytes) rows, one per distinct policy decision."""
        rows: dict[tuple[str, str], tuple[int, int]] = {}
        for t in self.tensors:
            d = t.decision
            reason = d.reason + (f" [{d.rule.describe()}]" if d.rule is not None else "")
            n, b = rows.get((d.ggml_type.name, reason), (0, 0))
            rows[(d.ggml_type.name, reason)] = (n + 1, b + t.nbytes)
        return [(k[0], k[1], n, b) for k, (n, b) in sorted(rows.items())]

    def format(self) -> str:
        lines = [f"wrote {self.path}: {len(self.tensors)} tensors, {_size(self.file_size)} "
                 f"(--type {self.weight_type}) in {self.seconds:.1f} s"]
        for gtype, reason, n, b in self.by_decision():
            lines.append(f"  {gtype:<5} x{n:<5} {_size(b):>10}  {reason}")
        lines.append("  by type: " + ", ".join(f"{k} x{n} ({_size(b)})"
                                               for k, (n, b) in self.by_type().items()))
        if self.embedded_files:
            total = sum(self.embedded_files.values())
            lines.append(f"  embedded files: {len(self.embedded_files)} ({_size(total)}): "
                         + ", ".join(self.embedded_files))
        return "\n".join(lines)


def _size(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def write_package(
    plan: PackagePlan,
    out: str | Path,
    weight_type: str | GGMLQuantizationType = "f32",
    keep_types: Sequence[KeepRule] = (),
    *,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> PackageSummary:
    """Validate ``plan``, decide every tensor's type, and write the package atomically."""
    t0 = time.perf_counter()
    out = Path(out).expanduser()
    if out.exists() and not overwrite:
        raise UsageError(f"{out} already exists", hint="pass --overwrite to replace it")
    if out.is_dir():
        raise UsageError(f"{out} is a folder", hint="pass the path of the .gguf file to write")
    wtype = weight_type if isinstance(weight_type, GGMLQuantizationType) else parse_weight_type(weight_type)
    validate_plan(plan)
    policy = QuantizationPolicy.from_spec(plan.spec, wtype, tuple(keep_types))
    items = _tensor_items(plan, policy)
    unused = policy.unused_cli_rules([d.name for _, _, d in items])
    if unused:
        raise UsageError(
            f"--keep-type {', '.join(r.pattern for r in unused)} matches no tensor",
            hint=f"patterns match logical names ns/name; namespaces: {', '.join(plan.namespaces)}",
        )
    entries, written = _directory(items)
    files = _embedded(plan)
    metadata = _metadata(plan, wtype, items, files)
    progress = progress or NullProgress()
    progress.start("packaging", len(items))
    try:
        with atomic_output(out) as fh:
            writer = GGUFStreamWriter(fh, metadata, entries)
            for (source, inner, decision), entry in zip(items, entries):
                tensor = source.get(inner)
                if tuple(tensor.shape) != decision.shape:
                    raise ModelError(f"tensor {decision.name!r} has shape {tuple(tensor.shape)}, "
                                     f"its source announced {decision.shape}")
                try:
                    data = encode_tensor(tensor, entry.ggml_type, decision.name)
                except ValueError as exc:
                    raise ModelError(str(exc)) from None
                del tensor
                writer.write_tensor(data)
                del data
                progress.advance()
            writer.finish()
    except OSError as exc:
        raise ModelError(f"cannot write {out}: {exc.strerror or exc}",
                         hint="check that the folder exists, is writable and has free space") from None
    finally:
        progress.close()
    return PackageSummary(
        path=out, weight_type=type_name(wtype), tensors=written,
        embedded_files={name: len(data) for name, data in files.items()},
        file_size=out.stat().st_size, seconds=time.perf_counter() - t0,
    )


def _ordered_namespaces(plan: PackagePlan) -> list[str]:
    order: list[str] = []
    if plan.spec is not None:
        required, optional = package_namespaces(plan.spec)
        order = [ns for ns in required + optional if ns in plan.namespaces]
    return order + [ns for ns in plan.namespaces if ns not in order]


def _tensor_items(plan: PackagePlan, policy: QuantizationPolicy) -> list[tuple[TensorSource, str, Decision]]:
    items = []
    for ns in _ordered_namespaces(plan):
        source = plan.namespaces[ns]
        for inner in source.names():
            info = source.info(inner)
            items.append((source, inner, policy.decide(f"{ns}/{inner}", tuple(info.shape), info.dtype)))
    if not items:
        raise UsageError("nothing to package: the inputs hold no tensors")
    return items


def _directory(
        items: list[tuple[TensorSource, str, Decision]]) -> tuple[list[TensorEntry], list[WrittenTensor]]:
    entries, written, used = [], [], set()
    for i, (_, _, decision) in enumerate(items):
        name = decision.name
        if len(name.encode("utf-8")) >= GGML_MAX_NAME or name in used:
            name = f"_audiocpp.{i}"
        used.add(name)
        entry = TensorEntry(name, physical_ne(decision.shape), decision.ggml_type)
        entries.append(entry)
        written.append(WrittenTensor(decision, name, entry.nbytes))
    return entries, written


def _embedded(plan: PackagePlan) -> dict[str, bytes]:
    out = {}
    for name in sorted(plan.files):
        data = plan.files[name]
        if isinstance(data, bytes):
            out[name] = data
            continue
        try:
            out[name] = Path(data).read_bytes()
        except OSError as exc:
            raise ModelError(f"sidecar {name!r} ({data}) cannot be read: {exc.strerror or exc}") from None
    return out


def _metadata(plan: PackagePlan, wtype: GGMLQuantizationType, items: list[tuple[TensorSource, str, Decision]],
              files: dict[str, bytes]) -> list[KV]:
    kv = [
        KV("general.architecture", ARCHITECTURE, S),
        KV("general.name", plan.name or plan.family, S),
        KV(KEY_NAME_FORMAT, "native", S),
        KV(KEY_SOURCE_FORMAT, plan.source_format or "packed", S),
        KV(KEY_WEIGHT_TYPE, type_name(wtype), S),
    ]
    spec_text = plan.spec_text()
    if spec_text is not None:
        kv += [KV(KEY_SPEC_VERSION, 1, GGUFValueType.UINT32), KV(KEY_SPEC_FAMILY, plan.family, S),
               KV(KEY_SPEC_JSON, spec_text, S)]
    namespaces = _ordered_namespaces(plan)
    kv += [KV(KEY_SOURCE_NAMES, namespaces, A, S),
           KV(KEY_SOURCE_PATHS, [plan.source_paths.get(ns, "") for ns in namespaces], A, S)]
    if files:
        offsets = np.zeros(len(files) + 1, dtype="<u8")
        offsets[1:] = np.cumsum([len(d) for d in files.values()])
        blob = np.frombuffer(b"".join(files.values()), dtype=np.uint8)
        kv += [KV(KEY_FILE_NAMES, list(files), A, S), KV(KEY_FILE_OFFSETS, offsets, A, GGUFValueType.UINT64),
               KV(KEY_FILE_DATA, blob, A, GGUFValueType.UINT8)]
    reserved = {k.key for k in kv} | {KEY_NAMES, KEY_RANKS, KEY_SHAPES, "general.alignment"}
    for key, value in plan.metadata.items():
        if key in reserved:
            raise UsageError(f"extra metadata key {key!r} is reserved by the package layout")
        kv.append(kv_of(key, value))
    shapes = [d.shape for _, _, d in items]
    kv += [
        KV(KEY_NAMES, [d.name for _, _, d in items], A, S),
        KV(KEY_RANKS, np.asarray([len(s) for s in shapes], dtype="<i4"), A, GGUFValueType.INT32),
        KV(KEY_SHAPES, np.asarray([x for s in shapes for x in s], dtype="<i8"), A, GGUFValueType.INT64),
    ]
    return kv
