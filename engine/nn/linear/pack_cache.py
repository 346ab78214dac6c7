"""Q8_0 / Q4_0 matrices kept on disk in the kernel's packed layout: a package is packed once per
machine, not on every start.

Packing a package's blocks into :mod:`engine.nn.linear.q8_0_linear`'s layout costs a process 0.3-0.9 s
(VoxCPM2's 2.1 GiB of Q8_0 matrices: 0.7 s, most of it the fresh memory the packed copy needs),
two to four times what reading the whole file from the page cache takes. So the first process that
packs a package's matrices also writes them, in that layout, to a file under
``$AUDIOCPP_CACHE_DIR/packed`` (``~/.cache/audiocpp/packed``); later processes map that file and
compute straight from it: nothing is packed or copied, and the pages come from the page cache,
shared by every process that runs the package (a server's workers hold one copy).

A cache file is used only for the package version it was written from (the package's real path,
size, modification time, inode and device), the kernel layout it holds (a hash of the kernel's
source and the byte its build adds to stored values), and only for matrices whose first and last
bytes in the package still have the checksum recorded; anything else (a stale, truncated, foreign
or unreadable file) is ignored and the matrices are packed again. Files written for older versions
of a package are deleted when a new one is written. A cache that cannot be written (read-only
folder, less than 1 GiB free after the write) is skipped; ``AUDIOCPP_PACK_CACHE=0`` turns it off.
The numbers never change: a matrix from the cache is the packed matrix, byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import shutil
import struct
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ...weights.blocks import BlockTensor
from ...weights.gguf_file import FileOrigin, mapped_origin
from ..kernels import jit

SWITCH = "AUDIOCPP_PACK_CACHE"
MAGIC = b"ACPPACK1"
#: where each tensor starts in a cache file (a page: its mapping shares whole pages)
ALIGN = 4096
#: free space a write must leave on the cache's disk
MIN_FREE = 1 << 30
_CHECK_BYTES = 4096


def enabled() -> bool:
    return not jit.disabled(SWITCH)


def folder() -> Path:
    from ...weights.package import cache_dir

    return cache_dir() / "packed"


@dataclass(frozen=True)
class _Key:
    """One stored matrix: its package, where its bytes start there, its shape and bits."""

    origin: FileOrigin
    offset: int
    rows: int
    cols: int
    bits: int


def _check(raw: np.ndarray) -> int:
    """A checksum of a matrix's first and last bytes in the package (a rewritten package with the
    same size and time is caught here too)."""
    head = raw[:_CHECK_BYTES]
    tail = raw[-_CHECK_BYTES:] if raw.size > _CHECK_BYTES else raw[:0]
    return zlib.crc32(tail.tobytes(), zlib.crc32(head.tobytes()))


def _prefix(origin: FileOrigin) -> str:
    return hashlib.sha256(origin.path.encode()).hexdigest()[:16]


def _version(origin: FileOrigin) -> str:
    return hashlib.sha256(origin.version.encode()).hexdigest()[:12]


def _name(origin: FileOrigin, layout: str) -> str:
    """``<path hash>-<version hash>-<layout hash>``: the start of the names of a package version's
    files in one layout (a file adds the hash of the matrices it holds)."""
    return f"{_prefix(origin)}-{_version(origin)}-{hashlib.sha256(layout.encode()).hexdigest()[:12]}"


class _Store:
    """The cache files of one package version and layout: what they hold, mapped."""

    def __init__(self, origin: FileOrigin, layout: str) -> None:
        self.origin, self.layout = origin, layout
        self.name = _name(origin, layout)
        self.entries: dict[int, tuple[dict, torch.Tensor, torch.Tensor]] = {}
        try:
            paths = sorted(folder().glob(f"{self.name}-*.pack"))
        except OSError:
            paths = []
        for path in paths:
            self._read(path)

    def _read(self, path: Path) -> None:
        try:
            with open(path, "rb") as fh:
                head = fh.read(len(MAGIC) + 8)
                if len(head) < len(MAGIC) + 8 or head[:len(MAGIC)] != MAGIC:
                    return
                (length,) = struct.unpack("<Q", head[len(MAGIC):])
                if length > 1 << 26:
                    return
                index = json.loads(fh.read(length))
                if index.get("origin") != [self.origin.path, self.origin.version] \
                        or index.get("layout") != self.layout:
                    return
                size, start = os.fstat(fh.fileno()).st_size, _data_start(length)
                entries = index["entries"]
                for e in entries:
                    for part in ("packed", "scales"):
                        at, count = (int(v) for v in e[part])
                        if at < 0 or count <= 0 or start + at + count > size:
                            return  # cut short, or not an index this module wrote
                        e[part] = [start + at, count]
                mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
            found = {}
            for e in entries:
                packed = torch.frombuffer(mm, dtype=torch.uint8, count=e["packed"][1], offset=e["packed"][0])
                scales = torch.frombuffer(mm, dtype=torch.int16, count=e["scales"][1] // 2,
                                          offset=e["scales"][0])
                found[int(e["offset"])] = (e, packed, scales)
        except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError, RuntimeError):
            return
        self.entries.update(found)

    def find(self, key: _Key, raw: np.ndarray, shapes: tuple[tuple[int, ...], tuple[int, ...]]
             ) -> tuple[torch.Tensor, torch.Tensor] | None:
        found = self.entries.get(key.offset)
        if found is None:
            return None
        e, packed, scales = found
        if (e["rows"], e["cols"], e["bits"]) != (key.rows, key.cols, key.bits) \
                or packed.numel() != np.prod(shapes[0]) or scales.numel() != np.prod(shapes[1]) \
                or e["check"] != _check(raw):
            return None
        return packed.view(shapes[0]), scales.view(shapes[1])


#: per thread, inside :func:`collecting`: the matrices packed there (written at its end) and the
#: cache files read there (read once per load; not kept after it, so an unloaded model's files
#: are unmapped with its tensors)
_context = threading.local()


def _store(origin: FileOrigin, layout: str) -> _Store:
    stores = getattr(_context, "stores", None)
    if stores is None:  # outside a load: read for this one lookup
        return _Store(origin, layout)
    store = stores.get((origin, layout))
    if store is None:
        store = stores[(origin, layout)] = _Store(origin, layout)
    return store


def _key(blocks: BlockTensor, bits: int) -> _Key | None:
    found = mapped_origin(blocks.data)
    if found is None:
        return None
    origin, offset = found
    return _Key(origin, offset, blocks.shape[0], blocks.shape[1], bits)


def lookup(blocks: BlockTensor, bits: int, layout: str,
           shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The packed values and scales of ``blocks`` (a view of a mapped package) in ``layout``, as
    views of a cache file, with the ``shapes`` of the kernel's buffers; None where the cache has
    no valid copy (or is off)."""
    if not enabled():
        return None
    key = _key(blocks, bits)
    if key is None:
        return None
    return _store(key.origin, layout).find(key, blocks.data.reshape(-1), shapes)


def remember(blocks: BlockTensor, bits: int, layout: str, packed: torch.Tensor, scales: torch.Tensor) -> None:
    """Note a matrix just packed, to be written when the enclosing :func:`collecting` ends (outside
    one, or for blocks that do not view a mapped package, nothing is kept)."""
    pending = getattr(_context, "items", None)
    if pending is None or not enabled():
        return
    key = _key(blocks, bits)
    if key is not None:
        pending.append((key, layout, _check(blocks.data.reshape(-1)), packed, scales))


@contextmanager
def collecting() -> Iterator[None]:
    """A load: the cache files are read once inside, and the matrices packed inside are written to
    the cache at the end (one file per package version and layout)."""
    outer = getattr(_context, "items", None) is not None
    if not outer:
        _context.items, _context.stores = [], {}
    try:
        yield
        if not outer:
            write(_context.items)
    finally:
        if not outer:
            _context.items = _context.stores = None


def write(items: list) -> list[Path]:
    """Write packed matrices ``(key, layout, check, packed, scales)`` to one cache file per
    package version and layout; returns the files written (none where the cache cannot be)."""
    groups: dict[tuple[FileOrigin, str], list] = {}
    for item in items:
        groups.setdefault((item[0].origin, item[1]), []).append(item)
    written = []
    for (origin, layout), group in groups.items():
        path = _write_one(origin, layout, group)
        if path is not None:
            written.append(path)
    return written


def _write_one(origin: FileOrigin, layout: str, group: list) -> Path | None:
    entries, place = [], 0
    for key, _, check, packed, scales in group:  # offsets from the start of the data
        p_at = place = -(-place // ALIGN) * ALIGN
        place += packed.numel()
        s_at = place = -(-place // ALIGN) * ALIGN
        place += scales.numel() * 2
        entries.append({"offset": key.offset, "rows": key.rows, "cols": key.cols, "bits": key.bits,
                        "check": check, "packed": [p_at, packed.numel()],
                        "scales": [s_at, scales.numel() * 2]})
    index = {"origin": [origin.path, origin.version], "layout": layout, "entries": entries}
    body = json.dumps(index).encode()
    start = _data_start(len(body))
    offsets = ",".join(str(key.offset) for key, *_ in group)
    target = folder() / f"{_name(origin, layout)}-{hashlib.sha256(offsets.encode()).hexdigest()[:12]}.pack"
    tmp = target.with_name(f".{target.name}.{os.getpid()}-{threading.get_ident()}.tmp")  # one per writer
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if shutil.disk_usage(target.parent).free < start + place + MIN_FREE:
            return None
        if sys.stderr.isatty() or jit.debugging():
            print(f"audiocpp: keeping {Path(origin.path).name}'s packed matrices for later starts in "
                  f"{target.parent} ({(start + place) / 2**30:.1f} GiB, once)", file=sys.stderr, flush=True)
        with open(tmp, "wb") as fh:
            fh.write(MAGIC + struct.pack("<Q", len(body)) + body)
            for e, (_, _, _, packed, scales) in zip(entries, group):
                for at, tensor in ((e["packed"][0], packed), (e["scales"][0], scales)):
                    fh.seek(start + at)
                    fh.write(memoryview(tensor.contiguous().view(torch.uint8).numpy()))
        os.replace(tmp, target)
    except OSError:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        return None
    _remove_stale(target.parent, origin)
    return target


def _data_start(index_bytes: int) -> int:
    return -(-(len(MAGIC) + 8 + index_bytes) // ALIGN) * ALIGN


def _remove_stale(where: Path, origin: FileOrigin) -> None:
    """Delete the files of other versions of the same package (its path, another version), and
    its temporary files a day old (a process killed while writing)."""
    current = f"{_prefix(origin)}-{_version(origin)}-"
    day_ago = time.time() - 86400
    for path in where.glob(f".{_prefix(origin)}-*.tmp"):
        try:
            if path.stat().st_mtime < day_ago:
                path.unlink()
        except OSError:
            pass
    for path in where.glob(f"{_prefix(origin)}-*.pack"):
        if not path.name.startswith(current):
            try:
                path.unlink()
            except OSError:
                pass
