"""A streaming GGUF v3 writer.

Written here instead of using gguf-py's ``GGUFWriter`` for two reasons: its ``add_array``
builds one Python object per element (seconds for the multi-megabyte ``u8`` blob of
embedded files), and it keeps every tensor until ``write_tensors_to_file``. This writer
encodes numeric arrays straight from numpy, writes the header once every tensor's type and
shape are known, then takes tensors one at a time in file order, so a model is never held
in memory twice. The output is the standard GGUF layout that ggml, gguf-py and
``audiocpp.engine.weights.gguf_file`` read.
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
ALIGNMENT = 32

_NUMPY_OF = {
    GGUFValueType.UINT8: np.dtype("<u1"), GGUFValueType.INT8: np.dtype("<i1"),
    GGUFValueType.UINT16: np.dtype("<u2"), GGUFValueType.INT16: np.dtype("<i2"),
    GGUFValueType.UINT32: np.dtype("<u4"), GGUFValueType.INT32: np.dtype("<i4"),
    GGUFValueType.FLOAT32: np.dtype("<f4"), GGUFValueType.BOOL: np.dtype("<u1"),
    GGUFValueType.UINT64: np.dtype("<u8"), GGUFValueType.INT64: np.dtype("<i8"),
    GGUFValueType.FLOAT64: np.dtype("<f8"),
}
_VALUE_OF_NUMPY = {
    np.dtype("uint8"): GGUFValueType.UINT8, np.dtype("int8"): GGUFValueType.INT8,
    np.dtype("uint16"): GGUFValueType.UINT16, np.dtype("int16"): GGUFValueType.INT16,
    np.dtype("uint32"): GGUFValueType.UINT32, np.dtype("int32"): GGUFValueType.INT32,
    np.dtype("float32"): GGUFValueType.FLOAT32, np.dtype("bool"): GGUFValueType.BOOL,
    np.dtype("uint64"): GGUFValueType.UINT64, np.dtype("int64"): GGUFValueType.INT64,
    np.dtype("float64"): GGUFValueType.FLOAT64,
}


@dataclass(frozen=True)
class KV:
    """One metadata pair with an explicit GGUF type (``item_type`` for arrays)."""

    key: str
    value: Any
    type: GGUFValueType
    item_type: GGUFValueType | None = None


def kv_of(key: str, value: Any) -> KV:
    """A KV with its type inferred: str, bool, int (u32 when it fits, else i64), float (f32),
    bytes (u8[]), a numpy array (its dtype), a list of str / int (i32 or i64) / float (f32)."""
    if isinstance(value, KV):
        return value
    if isinstance(value, str):
        return KV(key, value, GGUFValueType.STRING)
    if isinstance(value, (bool, np.bool_)):
        return KV(key, bool(value), GGUFValueType.BOOL)
    if isinstance(value, (int, np.integer)):
        v = int(value)
        return KV(key, v, GGUFValueType.UINT32 if 0 <= v < 2**32 else GGUFValueType.INT64)
    if isinstance(value, (float, np.floating)):
        return KV(key, float(value), GGUFValueType.FLOAT32)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return KV(key, np.frombuffer(value, dtype=np.uint8), GGUFValueType.ARRAY, GGUFValueType.UINT8)
    if isinstance(value, np.ndarray):
        item = _VALUE_OF_NUMPY.get(value.dtype)
        if item is None:
            raise TypeError(f"metadata {key!r}: numpy dtype {value.dtype} has no GGUF type")
        return KV(key, value, GGUFValueType.ARRAY, item)
    if isinstance(value, (list, tuple)):
        items = list(value)
        if all(isinstance(v, str) for v in items):
            return KV(key, items, GGUFValueType.ARRAY, GGUFValueType.STRING)
        if all(isinstance(v, (bool, np.bool_)) for v in items):
            return KV(key, np.asarray(items, dtype=bool), GGUFValueType.ARRAY, GGUFValueType.BOOL)
        if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in items):
            fits = all(-(2**31) <= int(v) < 2**31 for v in items)
            item = GGUFValueType.INT32 if fits else GGUFValueType.INT64
            return KV(key, np.asarray(items, dtype=_NUMPY_OF[item]), GGUFValueType.ARRAY, item)
        if all(isinstance(v, (int, float, np.number)) for v in items):
            return KV(key, np.asarray(items, dtype="<f4"), GGUFValueType.ARRAY, GGUFValueType.FLOAT32)
    raise TypeError(f"metadata {key!r}: cannot store a value of type {type(value).__name__} in GGUF")


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack("<Q", len(raw)) + raw


def _scalar(value: Any, vtype: GGUFValueType) -> bytes:
    if vtype == GGUFValueType.STRING:
        return _string(value)
    return np.asarray(value, dtype=_NUMPY_OF[vtype]).tobytes()


def encode_kv(kv: KV) -> list[bytes | memoryview]:
    """The bytes of one KV pair, as pieces (large numeric arrays are not copied)."""
    head = _string(kv.key) + struct.pack("<I", int(kv.type))
    if kv.type != GGUFValueType.ARRAY:
        return [head + _scalar(kv.value, kv.type)]
    item = kv.item_type
    if item is None or item == GGUFValueType.ARRAY:
        raise TypeError(f"metadata {kv.key!r}: arrays need a scalar or string item type")
    if item == GGUFValueType.STRING:
        items = [s.encode("utf-8") for s in kv.value]
        body = b"".join(struct.pack("<Q", len(raw)) + raw for raw in items)
        return [head + struct.pack("<IQ", int(item), len(items)), body]
    arr = np.ascontiguousarray(kv.value, dtype=_NUMPY_OF[item]).reshape(-1)
    return [head + struct.pack("<IQ", int(item), arr.size), memoryview(arr).cast("B")]


@dataclass(frozen=True)
class TensorEntry:
    """A tensor's directory entry: physical name, ggml dims (``ne``, fastest first), type."""

    name: str
    ne: tuple[int, ...]
    ggml_type: GGMLQuantizationType

    @property
    def nbytes(self) -> int:
        block, type_size = GGML_QUANT_SIZES[self.ggml_type]
        count = 1
        for d in self.ne:
            count *= d
        if self.ne[0] % block:
            raise ValueError(f"tensor {self.name!r}: row length {self.ne[0]} is not a multiple of "
                             f"the {self.ggml_type.name} block size {block}")
        return count // block * type_size


def _pad(n: int, alignment: int = ALIGNMENT) -> int:
    return (alignment - n % alignment) % alignment


class GGUFStreamWriter:
    """Write header, metadata and tensor directory at once, then tensor data in order."""

    def __init__(self, fh: BinaryIO, metadata: Sequence[KV], tensors: Sequence[TensorEntry]) -> None:
        self.fh = fh
        self.tensors = list(tensors)
        self._next = 0
        self._offsets: list[int] = []
        offset = 0
        for entry in self.tensors:
            self._offsets.append(offset)
            offset += entry.nbytes + _pad(entry.nbytes)
        pieces: list[bytes | memoryview] = [
            GGUF_MAGIC + struct.pack("<IQQ", GGUF_VERSION, len(self.tensors), len(metadata))
        ]
        for kv in metadata:
            pieces.extend(encode_kv(kv))
        for entry, rel in zip(self.tensors, self._offsets):
            pieces.append(_string(entry.name) + struct.pack("<I", len(entry.ne))
                          + struct.pack(f"<{len(entry.ne)}Q", *entry.ne)
                          + struct.pack("<IQ", int(entry.ggml_type), rel))
        size = 0
        for piece in pieces:
            fh.write(piece)
            size += len(piece)
        fh.write(b"\0" * _pad(size))

    def write_tensor(self, data: np.ndarray) -> None:
        """Write the next tensor's bytes (any contiguous numpy array of exactly nbytes)."""
        entry = self.tensors[self._next]
        raw = memoryview(np.ascontiguousarray(data)).cast("B")
        if len(raw) != entry.nbytes:
            raise ValueError(f"tensor {entry.name!r}: {len(raw)} bytes given, {entry.nbytes} expected")
        self.fh.write(raw)
        self.fh.write(b"\0" * _pad(len(raw)))
        self._next += 1

    def finish(self) -> None:
        if self._next != len(self.tensors):
            raise ValueError(f"{len(self.tensors) - self._next} tensors were not written")


@contextmanager
def atomic_output(path: Path) -> Iterator[BinaryIO]:
    """A file handle whose content becomes ``path`` only if the block succeeds.

    The data goes to a hidden temporary file beside ``path`` that is renamed over it at the
    end (``os.replace``) and removed on any error or interrupt, so no partial file remains.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
