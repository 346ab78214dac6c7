"""audio.cpp / audiocpp package GGUFs: logical names, exact shapes, embedded files and spec.

Layout read here (as written by audio.cpp's ``audiocpp_gguf`` and by
``audiocpp.engine.packaging``):

- ``general.architecture = "audiocpp"``.
- ``audiocpp.tensor_names`` (string[], one per physical tensor, in file order): the logical
  name ``<namespace>/<tensor>``. The physical name is the logical one, or ``_audiocpp.<i>``
  when the logical name is too long for ggml (>= 64 bytes) or duplicated.
- ``audiocpp.tensor_ranks`` (i32[], one per tensor) and ``audiocpp.tensor_shapes`` (i64[],
  the dims flattened, PyTorch order; rank 0 = scalar): the exact shapes. The physical tensor
  may hold the same elements in another shape (a scalar as ``[1]``, a conv weight flattened
  to 2-D for quantization); it is reshaped on read.
- Sidecar files: ``audiocpp.embedded_files.names`` (string[]) + ``.offsets`` (u64[n+1]) +
  ``.data`` (u8[]), or the older ``.names`` + ``.contents`` (string[]).
- Embedded spec: ``audiocpp.model_spec.version`` (u32, 1), ``.family`` (str), ``.json`` (str).
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import torch

from ..errors import ModelError
from ..hashing import bytes_sha256
from .blocks import BlockTensor
from .gguf_file import GGUFFile, GGUFTensorInfo, dims_fit, ggml_type_name
from .gguf_source import gguf_blocks, gguf_tensor
from .source import TensorInfo, TensorSource, unknown_tensor

ARCHITECTURE = "audiocpp"
KEY_NAMES = "audiocpp.tensor_names"
KEY_RANKS = "audiocpp.tensor_ranks"
KEY_SHAPES = "audiocpp.tensor_shapes"
KEY_FILE_NAMES = "audiocpp.embedded_files.names"
KEY_FILE_OFFSETS = "audiocpp.embedded_files.offsets"
KEY_FILE_DATA = "audiocpp.embedded_files.data"
KEY_FILE_CONTENTS = "audiocpp.embedded_files.contents"
KEY_SPEC_VERSION = "audiocpp.model_spec.version"
KEY_SPEC_FAMILY = "audiocpp.model_spec.family"
KEY_SPEC_JSON = "audiocpp.model_spec.json"
MAX_PHYSICAL_NAME = 63  # GGML_MAX_NAME (64) minus the terminating NUL


def is_package(metadata: dict[str, Any]) -> bool:
    arch = metadata.get("general.architecture")
    return KEY_NAMES in metadata or (isinstance(arch, str) and arch == ARCHITECTURE)


def cache_dir() -> Path:
    """``$AUDIOCPP_CACHE_DIR`` or ``~/.cache/audiocpp``."""
    env = os.environ.get("AUDIOCPP_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "audiocpp"


class PackageSource(TensorSource):
    """A package GGUF addressed by logical names (``weights/...``); ``namespace(ns)`` views."""

    format = "package"

    def __init__(self, path: str | Path | GGUFFile) -> None:
        self.gguf = path if isinstance(path, GGUFFile) else GGUFFile(path)
        self.path = self.gguf.path
        self.metadata = self.gguf.metadata
        physical = list(self.gguf.tensors.values())
        logical = self._logical_names(physical)
        shapes = self._exact_shapes(physical, logical)
        self._entries: dict[str, tuple[GGUFTensorInfo, tuple[int, ...]]] = {}
        for info, name, shape in zip(physical, logical, shapes):
            if name in self._entries:
                raise self._corrupt(f"logical tensor name {name!r} appears twice in {KEY_NAMES}")
            self._entries[name] = (info, shape)
        self.model_spec_json, self.family = self._embedded_spec()
        self._embedded = read_embedded_files(self.gguf)
        self.files_root: Path | None = None
        self.files: dict[str, Path] = {}
        if self._embedded:
            self.files_root = extract_files(self._embedded)
            self.files = {name: self.files_root / name for name in self._embedded}

    # -- TensorSource -----------------------------------------------------------------
    def names(self) -> list[str]:
        return list(self._entries)

    def info(self, name: str) -> TensorInfo:
        info, shape = self._require(name)
        return TensorInfo(name, shape, ggml_type_name(info.ggml_type))

    def get(self, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
        info, shape = self._require(name)
        return gguf_tensor(self.gguf, info, dtype).reshape(shape)

    def blocks(self, name: str) -> BlockTensor | None:
        info, shape = self._require(name)
        return gguf_blocks(self.gguf, info, shape)

    def release(self, name: str) -> None:
        self.gguf.release(self._require(name)[0].name)

    def release_all(self) -> None:
        self.gguf.release_range(self.gguf.data_offset, self.gguf.size - self.gguf.data_offset)

    def embedded_file_names(self) -> list[str]:
        return list(self._embedded)

    def embedded_bytes(self, name: str) -> bytes:
        return self._embedded[name]

    # -- parsing ----------------------------------------------------------------------
    def _require(self, name: str) -> tuple[GGUFTensorInfo, tuple[int, ...]]:
        entry = self._entries.get(name)
        if entry is None:
            raise unknown_tensor(self, name)
        return entry

    def _corrupt(self, what: str) -> ModelError:
        return ModelError(
            f"{self.path} is not a valid audiocpp package: {what}",
            hint="re-create the package with `audiocpp package` (or audio.cpp's audiocpp_gguf)",
        )

    def _logical_names(self, physical: list[GGUFTensorInfo]) -> list[str]:
        names = self.metadata.get(KEY_NAMES)
        if names is None:
            return [info.name for info in physical]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise self._corrupt(f"{KEY_NAMES} is not a string array")
        if len(names) != len(physical):
            raise self._corrupt(f"{KEY_NAMES} has {len(names)} names for {len(physical)} tensors")
        return names

    def _exact_shapes(self, physical: list[GGUFTensorInfo], logical: list[str]) -> list[tuple[int, ...]]:
        ranks, dims = self.metadata.get(KEY_RANKS), self.metadata.get(KEY_SHAPES)
        if ranks is None and dims is None:
            return [info.torch_shape for info in physical]
        if dims is None and isinstance(ranks, np.ndarray) and not ranks.any():
            dims = np.empty(0, dtype=np.int64)  # all scalars: GGUF writers cannot write an empty array
        if not _int_array(ranks) or not _int_array(dims):
            raise self._corrupt(f"{KEY_RANKS} and {KEY_SHAPES} must both be present as integer arrays")
        if len(ranks) != len(physical):
            raise self._corrupt(f"{KEY_RANKS} has {len(ranks)} entries for {len(physical)} tensors")
        shapes, cursor = [], 0
        all_dims = dims.tolist()
        for info, name, rank in zip(physical, logical, ranks.tolist()):
            if rank < 0 or cursor + rank > len(all_dims):
                raise self._corrupt(f"{KEY_SHAPES} is too short for tensor {name!r}")
            shape = tuple(int(d) for d in all_dims[cursor : cursor + rank])
            cursor += rank
            if not dims_fit(shape):
                raise self._corrupt(f"tensor {name!r} has exact shape {shape}: negative, or too large")
            count = math.prod(shape)  # Python ints: no wrap-around
            stored = math.prod(info.ne)
            if count != stored:
                raise self._corrupt(
                    f"tensor {name!r} has exact shape {shape} ({count} elements) but stores {stored} elements"
                )
            shapes.append(shape)
        if cursor != len(dims):
            raise self._corrupt(f"{KEY_SHAPES} has {len(dims) - cursor} trailing dimensions")
        return shapes

    def _embedded_spec(self) -> tuple[str | None, str | None]:
        keys = (KEY_SPEC_VERSION, KEY_SPEC_FAMILY, KEY_SPEC_JSON)
        if not any(k in self.metadata for k in keys):
            return None, None
        version = self.metadata.get(KEY_SPEC_VERSION)
        family = self.metadata.get(KEY_SPEC_FAMILY)
        text = self.metadata.get(KEY_SPEC_JSON)
        if not isinstance(family, str) or not isinstance(text, str) or not family or not text:
            raise self._corrupt(f"the embedded model spec needs {KEY_SPEC_FAMILY} and {KEY_SPEC_JSON} "
                                "strings")
        if version != 1:
            raise ModelError(
                f"{self.path} embeds a model spec of version {version!r}; this audiocpp reads version 1",
                hint="upgrade audiocpp, or re-package the model with this version",
            )
        return text, family


def read_embedded_files(gguf: GGUFFile) -> dict[str, bytes]:
    """Embedded sidecars by normalized relative name (blob layout or legacy contents layout)."""
    meta = gguf.metadata
    names = meta.get(KEY_FILE_NAMES)
    blob = KEY_FILE_OFFSETS in meta or KEY_FILE_DATA in meta
    if names is None and KEY_FILE_CONTENTS not in meta and not blob:
        return {}

    def corrupt(what: str) -> ModelError:
        return ModelError(f"{gguf.path} has invalid embedded files: {what}",
                          hint="re-create the package with `audiocpp package`")

    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise corrupt(f"{KEY_FILE_NAMES} is missing or not a string array")
    out: dict[str, bytes] = {}
    if blob:
        offsets, data = meta.get(KEY_FILE_OFFSETS), meta.get(KEY_FILE_DATA)
        if data is None and isinstance(offsets, np.ndarray) and not offsets.any():
            data = np.empty(0, dtype=np.uint8)  # only empty files: the blob array cannot be written
        if not _int_array(offsets) or not isinstance(data, np.ndarray) or data.dtype.itemsize != 1:
            raise corrupt(f"{KEY_FILE_OFFSETS} (u64[n+1]) and {KEY_FILE_DATA} (u8[]) are both required")
        if len(offsets) != len(names) + 1:
            raise corrupt(f"{KEY_FILE_OFFSETS} has {len(offsets)} entries for {len(names)} files (wants n+1)")
        raw = data.view(np.uint8)
        bounds = offsets.tolist()
        for i, name in enumerate(names):
            lo, hi = int(bounds[i]), int(bounds[i + 1])
            if not 0 <= lo <= hi <= raw.size:
                raise corrupt(f"the byte range of {name!r} ({lo}..{hi}) is outside the {raw.size}-byte blob")
            _add(out, _safe_name(name, corrupt), raw[lo:hi].tobytes(), corrupt)
    else:
        contents = meta.get(KEY_FILE_CONTENTS)
        if not isinstance(contents, list) or len(contents) != len(names) \
                or not all(isinstance(text, str) for text in contents):
            raise corrupt(f"{KEY_FILE_CONTENTS} must be a string array as long as {KEY_FILE_NAMES}")
        for name, text in zip(names, contents):
            _add(out, _safe_name(name, corrupt), text.encode("utf-8", "surrogatepass"), corrupt)
    return out


def _int_array(value: Any) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.kind in "iu"


MAX_FILE_NAME = 255  # bytes in one path component (NAME_MAX)


def _safe_name(name: str, corrupt) -> str:
    pure = PurePosixPath(name.replace("\\", "/"))
    parts = [p for p in pure.parts if p not in ("", ".")]
    if not name or pure.is_absolute() or not parts or ".." in parts:
        raise corrupt(f"unsafe embedded file name {name!r}")
    if any(ord(c) < 32 or c == "\x7f" for c in name) or \
            any(len(p.encode("utf-8", "surrogatepass")) > MAX_FILE_NAME for p in parts) or len(parts) > 32:
        raise corrupt(f"embedded file name {name[:80]!r} has control characters or is too long")
    return "/".join(parts)


def _add(out: dict[str, bytes], name: str, data: bytes, corrupt) -> None:
    """Add one file; a name twice, or a name that is also another file's folder, is corrupt."""
    folders = {"/".join(name.split("/")[:i]) for i in range(1, name.count("/") + 1)}
    if name in out or folders & out.keys() or any(other.startswith(name + "/") for other in out):
        raise corrupt(f"embedded file name {name!r} clashes with another embedded file")
    out[name] = data


def extract_files(files: dict[str, bytes]) -> Path:
    """Write ``files`` once under ``<cache>/embedded/<sha256 prefix>/`` (atomic per file)."""
    digest = bytes_sha256(b"".join(
        len(n).to_bytes(8, "little") + n.encode() + len(d).to_bytes(8, "little") + d
        for n, d in sorted(files.items())
    ))
    root = cache_dir() / "embedded" / digest[:16]
    try:
        for name, data in files.items():
            target = root / name
            if target.is_file() and target.stat().st_size == len(data):
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=target.parent)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                os.replace(tmp, target)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
    except OSError as exc:
        raise ModelError(
            f"cannot extract the package's embedded files to {root}: {exc.strerror or exc}",
            hint="set AUDIOCPP_CACHE_DIR to a writable folder",
        ) from None
    return root
