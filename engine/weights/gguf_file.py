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
import os
import stat
import struct
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import fs
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
#: nested arrays deeper than this are refused (real files nest two levels: merges as pairs)
MAX_ARRAY_DEPTH = 8
#: the smallest encoding of an array item of these types: a count is refused before anything is
#: allocated when that many items cannot fit in the rest of the file
_MIN_ITEM_BYTES = {_STRING: 8, _ARRAY: 12}
MAX_DIM = 2**63 - 1  # ggml's ne is int64


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

    def value(self, vtype: int, depth: int = 0) -> Any:
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            item_type = self.u32()
            count = self.u64()
            least = _MIN_ITEM_BYTES.get(item_type)
            if least is not None and count * least > len(self.buf) - self.pos:
                raise ModelError(
                    f"{self.path} is truncated or corrupt: an array at offset {self.pos - 12} claims {count} "
                    f"items, more than the rest of the file can hold", hint=_CORRUPT_HINT)
            if item_type == _STRING:
                return [self.string() for _ in range(count)]
            if item_type == _ARRAY:
                if depth >= MAX_ARRAY_DEPTH:
                    raise ModelError(f"{self.path} is corrupt: arrays nested more than {MAX_ARRAY_DEPTH} "
                                     f"deep (offset {self.pos - 12})", hint=_CORRUPT_HINT)
                return [self.value(_ARRAY, depth + 1) for _ in range(count)]
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
        self._file, self._mmap = _map(self.path)
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
                             hint="rewrite it with a current gguf-py or llama.cpp converter "
                             "(they write version 3)")
        n_tensors, n_kv = cur.u64(), cur.u64()
        # the smallest key/value takes 8 + 4 + 1 bytes, the smallest tensor info 8 + 4 + 4 + 8
        if n_tensors > 10_000_000 or n_kv > 10_000_000 or n_kv * 13 + n_tensors * 24 > len(buf):
            raise ModelError(f"{self.path} is corrupt: implausible counts ({n_tensors} tensors, {n_kv} keys "
                             f"in {len(buf)} bytes)", hint=_CORRUPT_HINT)
        self.metadata: dict[str, Any] = {}
        for _ in range(n_kv):
            key = cur.string()
            self.metadata[key] = cur.value(cur.u32())
        infos = []
        for _ in range(n_tensors):
            name = cur.string()
            n_dims = cur.u32()
            if n_dims > 8:
                raise ModelError(f"{self.path} is corrupt: tensor {name!r} has {n_dims} dimensions",
                                 hint=_CORRUPT_HINT)
            ne = tuple(cur.u64() for _ in range(n_dims))
            if not dims_fit(ne):
                raise ModelError(f"{self.path} is corrupt: tensor {name!r} has dimensions {ne}, whose "
                                 "product overflows 64 bits", hint=_CORRUPT_HINT)
            ggml_type = cur.u32()
            rel = cur.u64()
            infos.append((name, ne, ggml_type, rel))
        alignment = self._alignment()
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
        address = self.address
        # the mapping outlives this object while tensors view it: track the map itself
        _MAPPED[address] = (weakref.ref(self._mmap, lambda _, a=address: _MAPPED.pop(a, None)), len(buf),
                            _origin(self._file, self.path))

    def _alignment(self) -> int:
        value = self.metadata.get("general.alignment", DEFAULT_ALIGNMENT)
        if (isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 1 << 30
                or value & (value - 1)):
            raise ModelError(f"{self.path} is corrupt: general.alignment is {value!r}, not a power of two",
                             hint=_CORRUPT_HINT)
        return value

    def raw(self, name: str) -> np.ndarray:
        """The tensor's bytes as a uint8 view of the (copy-on-write) memory map.

        The file's size is checked first: reading a page of a mapping past the end of a file
        that was cut short while mapped kills the process (SIGBUS), so a file truncated since
        it was opened is a ModelError instead."""
        info = self.tensors[name]
        end = info.offset + info.nbytes
        try:
            size = os.fstat(self._file.fileno()).st_size
        except (OSError, ValueError):
            size = -1
        if size < end:
            raise ModelError(
                f"{self.path} changed while it was in use: tensor {name!r} needs bytes up to {end} "
                f"but the file now has {max(size, 0)}",
                hint="do not rewrite or truncate a model file while audiocpp reads it; load it again",
            )
        return np.frombuffer(self._buf, dtype=np.uint8, count=info.nbytes, offset=info.offset)

    @property
    def size(self) -> int:
        return len(self._buf)

    # -- page release (engine.weights.mapped) ---------------------------------------------
    @property
    def address(self) -> int:
        """The address of the mapping's first byte (to tell which tensors view it)."""
        return int(np.frombuffer(self._buf, dtype=np.uint8, count=1).ctypes.data) if len(self._buf) else 0

    def release(self, name: str) -> None:
        """Drop the pages of tensor ``name`` from this process (``MADV_DONTNEED``): the caller
        made its own copy. The mapping is private and never written, so a page touched again is
        read back from the file unchanged; only whole pages inside the tensor are dropped."""
        info = self.tensors.get(name)
        if info is not None:
            self.release_range(info.offset, info.nbytes)

    def release_range(self, offset: int, nbytes: int) -> None:
        if not self._mmap.closed:
            _madvise_dontneed(self._mmap, offset, nbytes)

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    @property
    def architecture(self) -> str | None:
        arch = self.metadata.get("general.architecture")
        return arch if isinstance(arch, str) else None


#: every live GGUF mapping by address: (a weak reference to the map, its size, the file it maps as
#: :class:`FileOrigin`); a mapping stays while tensors view it, after its GGUFFile is gone
_MAPPED: dict[int, tuple[weakref.ref, int, FileOrigin]] = {}


@dataclass(frozen=True)
class FileOrigin:
    """The file a mapping was made from: its real path and what tells this version of it from
    another (size, modification time, inode, device), as it was when it was mapped."""

    path: str
    version: str


def _origin(fh: Any, path: Path) -> FileOrigin:
    info = os.fstat(fh.fileno())
    return FileOrigin(os.path.realpath(path),
                      f"{info.st_size}:{info.st_mtime_ns}:{info.st_ino}:{info.st_dev}")


def _madvise_dontneed(mm: mmap.mmap, offset: int, nbytes: int) -> None:
    """Drop whole pages of ``[offset, offset + nbytes)`` of a private, never-written file map (read
    back from the file if touched again)."""
    advice = getattr(mmap, "MADV_DONTNEED", None)
    if advice is None or not hasattr(mm, "madvise"):
        return
    page = mmap.PAGESIZE
    start = (offset + page - 1) // page * page
    end = min(offset + nbytes, len(mm)) // page * page
    if end > start:
        try:
            mm.madvise(advice, start, end - start)
        except (OSError, ValueError):
            pass


def mapped_file(tensor: Any) -> tuple[mmap.mmap, int] | None:
    """The live GGUF mapping that holds ``tensor``'s bytes and their offset in it, or None (a
    tensor with its own memory, or a view of something else)."""
    try:
        ptr = int(tensor.data_ptr())
    except (AttributeError, RuntimeError):
        return None
    if getattr(tensor, "device", None) is not None and tensor.device.type != "cpu":
        return None
    found = _mapping_at(ptr)
    return None if found is None else (found[0], found[1])


def mapped_origin(array: np.ndarray) -> tuple[FileOrigin, int] | None:
    """The GGUF file whose live mapping ``array`` views and the offset of its first byte in the
    file, or None (an array with its own memory)."""
    if not array.size:
        return None
    found = _mapping_at(int(array.ctypes.data))
    return None if found is None else (found[2], found[1])


def _mapping_at(ptr: int) -> tuple[mmap.mmap, int, FileOrigin] | None:
    for base, (ref, size, origin) in list(_MAPPED.items()):
        if base <= ptr < base + size:
            mm = ref()
            if mm is not None and not mm.closed:
                return mm, ptr - base, origin
    return None


def release_pages(tensor: Any) -> bool:
    """Drop the pages of a tensor that views a GGUF mapping (after copying it elsewhere: packed,
    cast or quantized); True if it did. Tensors with their own memory are left alone."""
    found = mapped_file(tensor)
    if found is None:
        return False
    mm, offset = found
    _madvise_dontneed(mm, offset, int(tensor.numel() * tensor.element_size()))
    return True


def _map(path: Path) -> tuple[Any, mmap.mmap]:
    """Open ``path`` and map it copy-on-write; the file stays open for the size checks of ``raw``."""
    try:
        info = path.stat()
        if stat.S_ISDIR(info.st_mode):
            raise ModelError(f"{path} is a folder, not a GGUF file", hint="pass the .gguf file")
        if not stat.S_ISREG(info.st_mode):
            raise ModelError(f"{path} is not a regular file",
                             hint="pass a .gguf file (not a pipe or a device)")
        if info.st_size < 24:
            raise ModelError(f"{path} is not a GGUF file: only {info.st_size} bytes",
                             hint="pass a complete .gguf file")
        fh = open(path, "rb")  # noqa: SIM115 - kept open for the size checks of raw()
    except FileNotFoundError:
        raise ModelError(f"{path} does not exist", hint="check the path") from None
    except PermissionError:
        raise ModelError(f"{path} cannot be read (permission denied)",
                         hint="check the file's permissions") from None
    except OSError as exc:
        raise ModelError(f"{path} cannot be read: {exc.strerror or exc}", hint="check the path") from None
    try:
        return fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
    except (OSError, ValueError) as exc:
        fh.close()
        raise ModelError(f"{path} cannot be memory-mapped: {exc}",
                         hint="copy it to a local disk and retry") from None


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
    row = ne[0] if ne else 1
    if row % block:
        raise ModelError(f"{path}: tensor {name!r} row length {row} is not a multiple of the {qtype.name} "
                         f"block {block}",
                         hint=_CORRUPT_HINT)
    return count // block * type_size


def dims_fit(dims: tuple[int, ...] | list[int]) -> bool:
    """Every dimension in [0, 2^63) and their product (zeros counted as ones, as torch checks
    its sizes) below 2^63, so that numpy and torch can take the shape."""
    product = 1
    for d in dims:
        if not 0 <= d <= MAX_DIM:
            return False
        product *= max(d, 1)
    return product <= MAX_DIM


def read_gguf_metadata(path: str | Path) -> dict[str, Any]:
    return GGUFFile(path).metadata


def is_gguf(path: str | Path) -> bool:
    path = Path(path)
    if not fs.is_file(path):
        return False
    with open(path, "rb") as fh:
        return fh.read(4) == GGUF_MAGIC
