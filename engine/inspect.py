"""``audiocpp inspect``: what a model path holds (format, namespaces, dtypes, files, metadata)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from . import fs
from .errors import ModelError, SpecError
from .records import ModelInfo
from .spec.model_spec import ModelSpec
from .weights import TensorSource, open_weights, resolve_weights

#: Metadata keys shown by inspect when present.
KEY_METADATA = (
    "general.architecture", "general.name", "audiocpp.weight_type", "audiocpp.source_format",
    "audiocpp.model_spec.family", "audiocpp.model_spec.version", "audiocpp.family_distribution",
)


def _dtypes(sources: list[TensorSource]) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for source in sources:
        for name in source.names():
            counts[source.info(name).dtype] += 1
    return dict(sorted(counts.items()))


def embedded_spec(source: TensorSource) -> ModelSpec | None:
    """The model spec a package GGUF carries (validated), or None."""
    text = getattr(source, "model_spec_json", None)
    if not text:
        return None
    from .spec.validate import load_spec_text

    return load_spec_text(text, origin=f"embedded in {source.path}")


def inspect_path(path: str | Path, family: str, spec: ModelSpec) -> ModelInfo:
    """Describe ``path``: GGUFs (and single weight files) directly, folders through ``resolve_weights``."""
    path = Path(path).expanduser()
    if not fs.exists(path):
        raise ModelError(f"model path {str(path)!r} does not exist", hint="check the path")
    metadata: dict[str, object] = {}
    if path.is_dir():
        resolved = resolve_weights(spec, path)
        sources = list(resolved.namespaces.values())
        namespaces = {ns: len(src) for ns, src in resolved.namespaces.items()}
        files = sorted({str(p.relative_to(path)) if p.is_relative_to(path) else str(p)
                        for p in resolved.files.values()})
        fmt = resolved.layout
        metadata["source"] = f"{resolved.source_id} ({resolved.format})"
        metadata.update({k: resolved.metadata[k] for k in KEY_METADATA if k in resolved.metadata})
    else:
        source = open_weights(path)
        sources = [source]
        namespaces = {ns: len(source.namespace(ns)) for ns in source.namespaces()}
        files = sorted(source.files)
        fmt = source.format
        metadata.update({k: source.metadata[k] for k in KEY_METADATA if k in source.metadata})
        try:
            embedded = embedded_spec(source)
        except SpecError as exc:
            embedded = None
            metadata["spec"] = "the embedded spec is invalid: " + exc.message.splitlines()[-1].strip()
        if embedded is not None:
            spec = embedded  # a package describes itself: show the spec it carries
            metadata["spec"] = "embedded in the package"
    num_tensors = sum(len(s) for s in sources)
    return ModelInfo(
        family=family, path=path, format=fmt, spec_summary=spec.summary(), namespaces=namespaces,
        dtype_counts=_dtypes(sources), num_tensors=num_tensors, embedded_files=files, metadata=metadata,
    )
