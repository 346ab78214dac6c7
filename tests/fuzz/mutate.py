"""Byte-level mutations of valid seed files, as hypothesis strategies.

A mutated input is a seed with a few edits: a byte flipped or set, a 1/2/4/8-byte
little-endian field overwritten with an "interesting" number (0, 1, -1, 2^31, 2^32 - 1,
2^40, 2^62, 2^64 - 1 ...), a range deleted, duplicated or filled with random bytes, or the
file cut short. Positions are drawn inside the seed, and hypothesis shrinks a failing input
to few, small edits.
"""

from __future__ import annotations

import struct

from hypothesis import strategies as st

INTERESTING = (0, 1, 2, 3, 7, 8, 31, 32, 63, 64, 127, 128, 255, 256, 1023, 1024, 4095, 4096, 65535, 65536,
               2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**40, 2**48, 2**62, 2**63 - 1, 2**63, 2**64 - 1)


def _field(value: int, width: int) -> bytes:
    return (value % (1 << (8 * width))).to_bytes(width, "little")


@st.composite
def _edit(draw: st.DrawFn, size: int) -> tuple[str, int, object]:
    kind = draw(st.sampled_from(("flip", "set", "field", "delete", "duplicate", "random", "truncate",
                                 "insert")))
    pos = draw(st.integers(0, max(0, size - 1)))
    if kind == "flip":
        return kind, pos, 1 << draw(st.integers(0, 7))
    if kind == "set":
        return kind, pos, draw(st.integers(0, 255))
    if kind == "field":
        width = draw(st.sampled_from((1, 2, 4, 8)))
        value = draw(st.one_of(st.sampled_from(INTERESTING), st.integers(0, 2**64 - 1),
                               st.sampled_from(INTERESTING).map(lambda v: -v)))
        return kind, pos, _field(value, width)
    if kind in ("delete", "duplicate"):
        return kind, pos, draw(st.integers(1, 64))
    if kind == "random":
        return kind, pos, draw(st.binary(min_size=1, max_size=32))
    if kind == "insert":
        return kind, pos, draw(st.binary(min_size=1, max_size=16))
    return kind, pos, None


def apply_edits(data: bytes, edits: list[tuple[str, int, object]]) -> bytes:
    buf = bytearray(data)
    for kind, pos, arg in edits:
        if not buf:
            break
        pos = min(pos, len(buf) - 1)
        if kind == "flip":
            buf[pos] ^= int(arg)  # type: ignore[arg-type]
        elif kind == "set":
            buf[pos] = int(arg)  # type: ignore[arg-type]
        elif kind in ("field", "random"):
            chunk = bytes(arg)  # type: ignore[arg-type]
            buf[pos:pos + len(chunk)] = chunk[: len(buf) - pos]
        elif kind == "delete":
            del buf[pos:pos + int(arg)]  # type: ignore[arg-type]
        elif kind == "duplicate":
            buf[pos:pos] = buf[pos:pos + int(arg)]  # type: ignore[arg-type]
        elif kind == "insert":
            buf[pos:pos] = bytes(arg)  # type: ignore[arg-type]
        elif kind == "truncate":
            del buf[pos:]
    return bytes(buf)


@st.composite
def mutated(draw: st.DrawFn, seeds: dict[str, bytes], max_edits: int = 6,
            focus: int | None = None) -> tuple[str, bytes]:
    """``(seed name, mutated bytes)``. ``focus``: draw most positions in the first ``focus``
    bytes (the header), where a parser makes its decisions."""
    name = draw(st.sampled_from(sorted(seeds)))
    data = seeds[name]
    size = len(data)
    if focus is not None and draw(st.integers(0, 3)) > 0:
        size = min(size, focus)
    edits = draw(st.lists(_edit(size), min_size=1, max_size=max_edits))
    return name, apply_edits(data, edits)


def u32(v: int) -> bytes:
    return struct.pack("<I", v % 2**32)


def u64(v: int) -> bytes:
    return struct.pack("<Q", v % 2**64)
