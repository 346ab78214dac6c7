"""safetensors files (single or sharded by an index) as TensorSources, memory-mapped.

The header is parsed and checked here (length, JSON, dtypes, shapes, byte ranges) before
any tensor is touched, so a truncated or lying file is a clear ModelError. Tensors are read
by the safetensors library (``safe_open``): views of a private (copy-on-write) memory map,
zero-copy, and the file on disk is never written through them. The library also refuses
what our checks let through (gaps or overlaps between tensors); that is a ModelError too.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..errors import ModelError
from .gguf_file import dims_fit
from .source import TensorInfo, TensorSource, cast, still_whole, unknown_tensor

_DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool,
    "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2,
    "U16": torch.uint16, "U32": torch.uint32, "U64": torch.uint64,
}
MAX_HEADER = 100 * 1024 * 1024


def _bad(path: Path, what: str) -> ModelError:
    return ModelError(
        f"{path} is not a valid safetensors file: {what}",
        hint="the file is probably truncated or corrupt; download or convert it again",
    )


def read_safetensors_header(path: Path) -> tuple[dict[str, tuple[str, tuple[int, ...], int, int]], dict, int]:
    """Validate the header; returns ({name: (dtype, shape, begin, end)}, metadata, data start)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise _bad(path, f"only {size} bytes (a header length needs 8)")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER or 8 + n > size:
                raise _bad(path, f"the header claims {n} bytes but the file has {size}")
            raw = fh.read(n)
    except FileNotFoundError:
        raise ModelError(f"{path} does not exist") from None
    except OSError as exc:
        raise ModelError(f"{path} cannot be read: {exc.strerror or exc}", hint="check the path") from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # bad UTF-8 or JSON, numbers too long, nesting too deep
        raise _bad(path, f"the header is not valid JSON ({str(exc)[:200]})") from None
    if not isinstance(header, dict):
        raise _bad(path, "the header is not a JSON object")
    data_start, data_size = 8 + n, size - 8 - n
    metadata = header.pop("__metadata__", None) or {}
    entries = {}
    for name, entry in header.items():
        try:
            dtype, shape, (begin, end) = entry["dtype"], tuple(entry["shape"]), entry["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise _bad(path, f"tensor {name!r} has a malformed header entry") from None
        if not all(_is_int(v) for v in (*shape, begin, end)):
            raise _bad(path, f"tensor {name!r} has a shape or data_offsets that are not integers")
        if not isinstance(dtype, str) or dtype not in _DTYPES:
            raise ModelError(f"{path}: tensor {name!r} has dtype {str(dtype)[:40]}, which audiocpp cannot "
                             "read",
                             hint=f"supported: {', '.join(_DTYPES)}")
        if any(d < 0 for d in shape):
            raise _bad(path, f"tensor {name!r} has a negative dimension {shape}")
        if not dims_fit(shape):
            raise _bad(path, f"tensor {name!r} has a shape whose size overflows 64 bits")
        count = math.prod(shape)
        if not 0 <= begin <= end <= data_size:
            raise _bad(path, f"tensor {name!r} spans bytes {begin}..{end} of a {data_size}-byte data section")
        if end - begin != count * _DTYPES[dtype].itemsize:
            raise _bad(path, f"tensor {name!r} of shape {shape} {dtype} needs "
                             f"{count * _DTYPES[dtype].itemsize} bytes but spans {end - begin}")
        entries[name] = (dtype, shape, begin, end)
    return entries, (metadata if isinstance(metadata, dict) else {}), data_start


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class SafetensorsSource(TensorSource):
    """One ``.safetensors`` file."""

    format = "safetensors"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._entries, self.metadata, self._start = read_safetensors_header(self.path)
        self.files = {}
        self._handle: Any = None
        self._size = self._start + max((end for *_, end in self._entries.values()), default=0)

    def _file(self) -> Any:
        """The ``safe_open`` handle, opened on first use."""
        if self._handle is None:
            from safetensors import SafetensorError, safe_open

            try:
                self._handle = safe_open(str(self.path), framework="pt")
            except (SafetensorError, OSError) as exc:
                raise _bad(self.path, str(exc)) from None
        return self._handle

    def names(self) -> list[str]:
        return list(self._entries)

    def info(self, name: str) -> TensorInfo:
        entry = self._entries.get(name)
        if entry is None:
            raise unknown_tensor(self, name)
        return TensorInfo(name, entry[1], entry[0])

    def get(self, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
        entry = self._entries.get(name)
        if entry is None:
            raise unknown_tensor(self, name)
        from safetensors import SafetensorError

        still_whole(self.path, self._size)  # a page past the end of a cut mapping is a SIGBUS
        try:
            tensor = self._file().get_tensor(name)
        except (SafetensorError, OSError, RuntimeError) as exc:
            raise _bad(self.path, f"tensor {name!r} cannot be read ({str(exc)[:200]})") from None
        if tensor.data_ptr() % max(tensor.element_size(), 1):
            tensor = tensor.clone()  # an unaligned offset: give kernels an aligned copy
        return cast(tensor, dtype)


def _plain_file_name(name: str) -> bool:
    """A file under the index's own folder: relative, no '..', no NUL."""
    parts = name.replace("\\", "/").split("/")
    return bool(name) and not name.startswith(("/", "\\")) and ".." not in parts and "\0" not in name \
        and parts[-1] not in ("", ".")


class ShardedSource(TensorSource):
    """Several files joined by a ``*.index.json`` ``weight_map`` (safetensors or torch shards)."""

    def __init__(self, index_path: str | Path, open_shard: Callable[[Path], TensorSource]) -> None:
        self.path = Path(index_path)
        try:
            index = json.loads(self.path.read_text(encoding="utf-8"))
            weight_map: dict[str, Any] = index["weight_map"]
            if not isinstance(weight_map, dict):
                raise TypeError
        except FileNotFoundError:
            raise ModelError(f"{self.path} does not exist") from None
        except (ValueError, RecursionError, KeyError, TypeError):  # bad JSON, huge numbers, deep nesting
            raise ModelError(f"{self.path} is not a valid sharded-checkpoint index (no JSON weight_map)",
                             hint="download the index file again") from None
        except OSError as exc:
            raise ModelError(f"{self.path} cannot be read: {exc.strerror or exc}") from None
        metadata = index.get("metadata")
        self.metadata = metadata if isinstance(metadata, dict) else {}
        self.files = {}
        shards: dict[str, TensorSource] = {}
        for shard in weight_map.values():
            if not isinstance(shard, str) or not _plain_file_name(shard):
                raise ModelError(f"{self.path} maps a tensor to {str(shard)[:80]!r}, which is not a file "
                                 "name beside the index",
                                 hint="an index names the shard files in its own folder")
        for shard in dict.fromkeys(weight_map.values()):
            shard_path = self.path.parent / shard
            if not shard_path.is_file():
                raise ModelError(f"{self.path} lists shard {shard!r}, which is missing",
                                 hint=f"download {shard} into {self.path.parent}")
            shards[shard] = open_shard(shard_path)
        self._where: dict[str, TensorSource] = {}
        for name, shard in weight_map.items():
            source = shards[shard]
            if name not in source:
                raise ModelError(f"{self.path} maps {name!r} to {shard}, which does not hold it",
                                 hint="the index and its shards do not match; download them again")
            self._where[name] = source
        kinds = {s.format for s in shards.values()}
        self.format = kinds.pop() if len(kinds) == 1 else "safetensors"
        self.shards = shards

    def names(self) -> list[str]:
        return list(self._where)

    def info(self, name: str) -> TensorInfo:
        source = self._where.get(name)
        if source is None:
            raise unknown_tensor(self, name)
        return source.info(name)

    def get(self, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
        source = self._where.get(name)
        if source is None:
            raise unknown_tensor(self, name)
        return source.get(name, dtype)
