"""A fast, memory-mapped GGUF parser.

gguf-py's GGUFReader builds one numpy object per array element, which takes seconds for
the multi-megabyte byte arrays that packages embed (tokenizer files). This parser reads
primitive arrays as numpy views of the memory map, so opening a package costs
milliseconds. Dequantization still goes through ``gguf.quants``.

The file is mapped copy-on-write (``ACCESS_COPY``): views are writable numpy arrays, so
``torch.from_numpy`` wraps them without a copy and without the "non-writable array"
warning, while the file on disk can never be modified through them (a write touches only
this process's private copy of the page).
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelError

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32

# GGUF value types -> numpy dtypes (strings, bools and arrays are handled apart).
_SCALAR = {
    0: np.dtype("<u1"), 1: np.dtype("<i1"), 2: np.dtype("<u2"), 3: np.dtype("<i2"),
    4: np.dtype("<u4"), 5: np.dtype("<i4"), 6: np.dtype("<f4"), 7: np.dtype("<u1"),
    10: np.dtype("<u8"), 11: np.dtype("<i8"), 12: np.dtype("<f8"),
}
_BOOL, _STRING, _ARRAY = 7, 8, 9


@dataclass(frozen=True)
class GGUFTensorInfo:
    name: str
    ne: tuple[int, ...]  # ggml order: ne[0] is the fastest-varying dimension
    ggml_type: int
    offset: int  # absolute offset of the data in the file
    nbytes: int

    @property
    def torch_shape(self) -> tuple[int, ...]:
        """The PyTorch shape: ggml ``ne`` reversed."""
        return tuple(reversed(self.ne))


_CORRUPT_HINT = "the file is damaged or was written by a broken converter; fetch or convert it again"


class _Cursor:
    def __init__(self, buf: memoryview, path: Path) -> None:
        self.buf, self.pos, self.path = buf, 0, path

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise ModelError(
                f"{self.path} is truncated or corrupt: a header field runs past the end of the file "
                f"(offset {self.pos}, {n} bytes wanted, {len(self.buf)} in the file)",
                hint="the file was probably cut short by an interrupted download or copy; fetch it again",
            )
        view = self.buf[self.pos : self.pos + n]
        self.pos += n
        return view

    def u32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]

    def u64(self) -> int:
        return struct.unpack("<Q", self.take(8))[0]

    def string(self) -> str:
        n = self.u64()
        raw = self.take(n)
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise ModelError(f"{self.path} is corrupt: a GGUF string is not UTF-8 (offset {self.pos - n})",
                             hint=_CORRUPT_HINT) from None

    def value(self, vtype: int) -> Any:
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            item_type = self.u32()
            count = self.u64()
            if item_type == _STRING:
                return [self.string() for _ in range(count)]
            if item_type == _ARRAY:
                return [self.value(_ARRAY) for _ in range(count)]
            dtype = _SCALAR.get(item_type)
            if dtype is None:
                raise ModelError(f"{self.path} is corrupt: unknown GGUF array item type {item_type}",
                                 hint=_CORRUPT_HINT)
            arr = np.frombuffer(self.take(count * dtype.itemsize), dtype=dtype)
            return arr.astype(bool) if item_type == _BOOL else arr
        dtype = _SCALAR.get(vtype)
        if dtype is None:
            raise ModelError(f"{self.path} is corrupt: unknown GGUF value type {vtype}", hint=_CORRUPT_HINT)
        scalar = np.frombuffer(self.take(dtype.itemsize), dtype=dtype)[0].item()
        return bool(scalar) if vtype == _BOOL else scalar


class GGUFFile:
    """Metadata and tensor directory of a GGUF file, with tensor bytes as mmap views."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            with open(self.path, "rb") as fh:
                size = self.path.stat().st_size
                if size < 24:
                    raise ModelError(
                        f"{self.path} is not a GGUF file: only {size} bytes",
                        hint="pass a complete .gguf file",
                    )
                self._mmap = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
        except FileNotFoundError:
            raise ModelError(f"{self.path} does not exist", hint="check the path") from None
        except IsADirectoryError:
            raise ModelError(f"{self.path} is a folder, not a GGUF file", hint="pass the .gguf file") from None
        except PermissionError:
            raise ModelError(f"{self.path} cannot be read (permission denied)",
                             hint="check the file's permissions") from None
        buf = memoryview(self._mmap)
        cur = _Cursor(buf, self.path)
        magic = bytes(cur.take(4))
        if magic != GGUF_MAGIC:
            raise ModelError(
                f"{self.path} is not a GGUF file (magic {magic!r}, expected b'GGUF')",
                hint="check the path; GGUF files start with the bytes 'GGUF'",
            )
        self.version = cur.u32()
        if self.version not in (2, 3):
            raise ModelError(f"{self.path}: GGUF version {self.version} is not supported (2 and 3 are)",
                             hint="rewrite it with a current gguf-py or llama.cpp converter (they write version 3)")
        n_tensors, n_kv = cur.u64(), cur.u64()
        if n_tensors > 10_000_000 or n_kv > 10_000_000:
            raise ModelError(f"{self.path} is corrupt: implausible counts ({n_tensors} tensors, {n_kv} keys)",
                             hint=_CORRUPT_HINT)
        self.metadata: dict[str, Any] = {}
        for _ in range(n_kv):
            key = cur.string()
            self.metadata[key] = cur.value(cur.u32())
        infos = []
        for _ in range(n_tensors):
            name = cur.string()
            n_dims = cur.u32()
            if n_dims > 8:
                raise ModelError(f"{self.path} is corrupt: tensor {name!r} has {n_dims} dimensions", hint=_CORRUPT_HINT)
            ne = tuple(cur.u64() for _ in range(n_dims))
            ggml_type = cur.u32()
            rel = cur.u64()
            infos.append((name, ne, ggml_type, rel))
        alignment = int(self.metadata.get("general.alignment", DEFAULT_ALIGNMENT))
        data_start = (cur.pos + alignment - 1) // alignment * alignment
        self.data_offset = data_start
        self.tensors: dict[str, GGUFTensorInfo] = {}
        for name, ne, ggml_type, rel in infos:
            if name in self.tensors:
                raise ModelError(
                    f"{self.path} is corrupt: tensor name {name!r} appears twice",
                    hint="regenerate the file; GGUF tensor names must be unique",
                )
            nbytes = tensor_nbytes(ggml_type, ne, name=name, path=self.path)
            offset = data_start + rel
            if offset + nbytes > len(buf):
                raise ModelError(
                    f"{self.path} is truncated: tensor {name!r} needs bytes {offset}..{offset + nbytes} "
                    f"but the file has {len(buf)}",
                    hint="the file was cut short; fetch or convert it again",
                )
            self.tensors[name] = GGUFTensorInfo(name, ne, ggml_type, offset, nbytes)
        self._buf = buf

    def raw(self, name: str) -> np.ndarray:
        """The tensor's bytes as a uint8 view of the (copy-on-write) memory map."""
        info = self.tensors[name]
        return np.frombuffer(self._buf, dtype=np.uint8, count=info.nbytes, offset=info.offset)

    @property
    def size(self) -> int:
        return len(self._buf)

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    @property
    def architecture(self) -> str | None:
        arch = self.metadata.get("general.architecture")
        return arch if isinstance(arch, str) else None


def ggml_type_name(ggml_type: int) -> str:
    """``GGMLQuantizationType`` name (``F32``, ``Q8_0``, ``Q4_K``...) or ``TYPE_<n>``."""
    from gguf.constants import GGMLQuantizationType

    try:
        return GGMLQuantizationType(ggml_type).name
    except ValueError:
        return f"TYPE_{ggml_type}"


def tensor_nbytes(ggml_type: int, ne: tuple[int, ...], *, name: str = "", path: Path | None = None) -> int:
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    try:
        qtype = GGMLQuantizationType(ggml_type)
        block, type_size = GGML_QUANT_SIZES[qtype]
    except (ValueError, KeyError):
        raise ModelError(f"{path}: tensor {name!r} has unknown ggml type {ggml_type}",
                         hint="a newer ggml type than gguf-py knows, or a corrupt file") from None
    count = 1
    for d in ne:
        count *= int(d)
    if ne and ne[0] % block:
        raise ModelError(f"{path}: tensor {name!r} row length {ne[0]} is not a multiple of the {qtype.name} block {block}",
                         hint=_CORRUPT_HINT)
    return count // block * type_size


def read_gguf_metadata(path: str | Path) -> dict[str, Any]:
    return GGUFFile(path).metadata


def is_gguf(path: str | Path) -> bool:
    path = Path(path)
    if not path.is_file():
        return False
    with open(path, "rb") as fh:
        return fh.read(4) == GGUF_MAGIC
