"""GGUF files that may lie, built field by field (gguf-py's writer cannot write a lie).

``gguf_files()`` draws a header (version, tensor and key counts that may not match what
follows), key/value pairs of every GGUF type (strings with lying lengths, arrays of any item
type, nested arrays, unknown types), ``general.alignment`` of any type and value, and tensor
infos (any number of dimensions, any ``ne``, known and unknown ggml types, offsets anywhere),
then the data section. ``package_metadata()`` draws the audiocpp package keys for such files.
"""

from __future__ import annotations

import struct
from typing import Any

from hypothesis import strategies as st

from .mutate import INTERESTING, u32, u64

# GGUF value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
_PACK = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<B",
         U64: "<Q", I64: "<q", F64: "<d"}
_RANGE = {U8: (0, 255), I8: (-128, 127), U16: (0, 2**16 - 1), I16: (-(2**15), 2**15 - 1), U32: (0, 2**32 - 1),
          I32: (-(2**31), 2**31 - 1), BOOL: (0, 2), U64: (0, 2**64 - 1), I64: (-(2**63), 2**63 - 1)}


def gguf_string(text: str | bytes, lie: int | None = None) -> bytes:
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    return u64(len(raw) if lie is None else lie) + raw


def scalar(vtype: int, value: Any) -> bytes:
    if vtype in (F32, F64):
        return struct.pack(_PACK[vtype], float(value))
    lo, hi = _RANGE[vtype]
    return struct.pack(_PACK[vtype], min(max(int(value), lo), hi))


@st.composite
def _scalar_value(draw: st.DrawFn, vtype: int) -> bytes:
    if vtype in (F32, F64):
        return scalar(vtype, draw(st.floats(allow_nan=True, allow_infinity=True,
                                            width=32 if vtype == F32 else 64)))
    lo, hi = _RANGE[vtype]
    return scalar(vtype, draw(st.one_of(st.integers(lo, hi),
                                        st.sampled_from([v for v in INTERESTING if lo <= v <= hi]))))


@st.composite
def _string_value(draw: st.DrawFn) -> bytes:
    raw = draw(st.one_of(st.text(max_size=24).map(lambda s: s.encode("utf-8", "surrogatepass")),
                         st.binary(max_size=16)))
    lie = draw(st.one_of(st.none(), st.none(), st.sampled_from(INTERESTING)))
    return gguf_string(raw, lie)


@st.composite
def value(draw: st.DrawFn, depth: int = 0, unknown: bool = False) -> tuple[int, bytes]:
    """``(type, encoded value)`` of any GGUF type (``unknown``: or of an unknown one)."""
    vtype = draw(st.sampled_from([13, 255, 2**31, 2**32 - 1]) if unknown else st.integers(0, 12))
    if vtype == STRING:
        return vtype, draw(_string_value())
    if vtype == ARRAY:
        item = draw(st.integers(0, 13))  # 13: unknown
        if item == ARRAY and depth < 2:
            items = [draw(value(depth + 1))[1] for _ in range(draw(st.integers(0, 3)))]
            body = b"".join(items)  # the nested arrays' own type+count headers are in value() bytes
        elif item == STRING:
            items = [draw(_string_value()) for _ in range(draw(st.integers(0, 4)))]
            body = b"".join(items)
        elif item in _PACK:
            items = [draw(_scalar_value(item)) for _ in range(draw(st.integers(0, 8)))]
            body = b"".join(items)
        else:
            items, body = [], draw(st.binary(max_size=8))
        count = draw(st.one_of(st.just(len(items)), st.just(len(items)), st.sampled_from(INTERESTING)))
        return vtype, u32(item) + u64(count) + body
    if vtype in _PACK:
        return vtype, draw(_scalar_value(vtype))
    return vtype, draw(st.binary(max_size=8))


def _kv(key: str, vtype: int, body: bytes) -> bytes:
    return gguf_string(key) + u32(vtype) + body


KEYS = ("general.name", "general.architecture", "x.y", "", "tokenizer.ggml.tokens", "general.alignment.x")


@st.composite
def _alignment(draw: st.DrawFn) -> bytes:
    vtype = draw(st.sampled_from([U32, U32, U32, U32, I32, U64, F32, STRING, U8, BOOL]))
    if vtype == U32 and draw(st.booleans()):
        return _kv("general.alignment", U32, scalar(U32, draw(st.sampled_from([8, 16, 32, 64, 4096]))))
    if vtype == STRING:
        return _kv("general.alignment", STRING, gguf_string("32"))
    return _kv("general.alignment", vtype, draw(_scalar_value(vtype)))


GGML_TYPES = (0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27,
              28, 29, 30, 34, 35, 39)
#: ggml types with their (block, bytes per block), for tensors that are valid before a lie
VALID_TYPES = {0: (1, 4), 1: (1, 2), 30: (1, 2), 24: (1, 1), 26: (1, 4), 27: (1, 8), 8: (32, 34), 2: (32, 18),
               12: (256, 144), 14: (256, 210)}


@st.composite
def tensors(draw: st.DrawFn) -> list[tuple[str, list[int], int, int]]:
    """``[(name, ne, ggml type, nbytes)]``: consistent tensors (the lies come later)."""
    out = []
    for i in range(draw(st.integers(0, 4))):
        ggml = draw(st.sampled_from(sorted(VALID_TYPES)))
        block, size = VALID_TYPES[ggml]
        ne = [block * draw(st.integers(0 if block == 1 else 1, 3))]
        ne += [draw(st.integers(0, 3)) for _ in range(draw(st.integers(0, 3)))]
        count = 1
        for d in ne:
            count *= d
        out.append((f"t{i}", ne, ggml, count // block * size))
    return out


@st.composite
def _tensor_info(draw: st.DrawFn, tensor: tuple[str, list[int], int, int], offset: int) -> bytes:
    name, ne, ggml, _ = tensor
    lie = draw(st.integers(0, 24))  # 0..3: one field lies; else the truth
    n_dims = len(ne)
    name_bytes = gguf_string(name)
    if lie == 0:
        ne = [draw(st.one_of(st.integers(0, 64), st.sampled_from(INTERESTING)))
              for _ in range(draw(st.integers(0, 9)))]
        n_dims = draw(st.one_of(st.just(len(ne)), st.sampled_from([5, 8, 9, 2**32 - 1])))
    elif lie == 1:
        ggml = draw(st.one_of(st.sampled_from(GGML_TYPES), st.integers(0, 2**32 - 1)))
    elif lie == 2:
        offset = draw(st.one_of(st.integers(0, 4096), st.sampled_from(INTERESTING)))
    elif lie == 3:
        name_bytes = gguf_string(draw(st.one_of(st.text(max_size=70), st.just("t0"))),
                                 draw(st.one_of(st.none(), st.sampled_from(INTERESTING))))
    return name_bytes + u32(n_dims) + b"".join(u64(d) for d in ne[:9]) + u32(ggml) + u64(offset)


@st.composite
def gguf_files(draw: st.DrawFn, extra_kvs: Any = None) -> bytes:
    """A GGUF file; ``extra_kvs(tensors)`` draws more key/value pairs knowing the tensors."""
    found = draw(tensors())
    lie = draw(st.integers(0, 15))  # 0..4: a header lie; else only the lies of the values and infos
    kvs: list[bytes] = []
    for _ in range(draw(st.integers(0, 4))):
        vtype, body = draw(value())
        kvs.append(_kv(draw(st.sampled_from(KEYS)), vtype, body))
    if lie == 0:
        vtype, body = draw(value(unknown=True))
        kvs.append(_kv("x.unknown", vtype, body))
    if lie == 1 or draw(st.integers(0, 3)) == 0:
        kvs.append(draw(_alignment()))
    if extra_kvs is not None:
        kvs.extend(draw(extra_kvs(found)))
    infos, offset = [], 0
    for tensor in found:
        infos.append(draw(_tensor_info(tensor, offset)))
        offset += (tensor[3] + 31) // 32 * 32
    version = draw(st.sampled_from([0, 1, 2, 4, 2**32 - 1])) if lie == 2 else 3
    n_tensors = draw(st.sampled_from(INTERESTING)) if lie == 3 else len(infos)
    n_kv = draw(st.sampled_from(INTERESTING)) if lie == 4 else len(kvs)
    head = b"GGUF" + u32(version) + u64(n_tensors) + u64(n_kv) + b"".join(kvs) + b"".join(infos)
    pad = (-len(head)) % 32
    data_len = offset + (draw(st.sampled_from([-1, -31, 7, 64])) if lie == 5 else 0)
    return (head + b"\0" * pad
            + draw(st.binary(max_size=64)).ljust(max(0, data_len), b"\x01")[:max(0, data_len)])


# -- package keys ---------------------------------------------------------------------------------
def _str_array(items: list[str]) -> bytes:
    return u32(STRING) + u64(len(items)) + b"".join(gguf_string(s) for s in items)


def _num_array(item: int, values: list[Any]) -> bytes:
    return u32(item) + u64(len(values)) + b"".join(scalar(item, v) for v in values)


NAMES = st.one_of(st.sampled_from(["t0", "t1", "weights/a", "../etc/passwd", "/abs", "a/../../b", "a\\..\\b",
                                   "", ".", "a//b", "a\0b", "x" * 300, "_audiocpp.0", "con", "a/b/c/d.json"]),
                  st.text(max_size=40))


@st.composite
def package_kvs(draw: st.DrawFn, found: list[tuple[str, list[int], int, int]]) -> list[bytes]:
    """The audiocpp package keys for ``found``: mostly right, each may lie."""
    n = len(found)
    kvs = [_kv("general.architecture", STRING, gguf_string("audiocpp"))]
    if draw(st.integers(0, 3)):
        names = [f"ns/{t[0]}" for t in found]
        if not draw(st.integers(0, 2)):
            names = draw(st.lists(NAMES, min_size=n, max_size=n + draw(st.integers(0, 1))))
        kvs.append(_kv("audiocpp.tensor_names", ARRAY, _str_array(names)))
    if draw(st.integers(0, 3)):
        ranks = [len(t[1]) for t in found]
        dims = [d for t in found for d in reversed(t[1])]
        ritem, ditem = I32, I64
        lie = draw(st.integers(0, 5))
        if lie == 0:
            ranks = draw(st.lists(st.one_of(st.integers(-3, 5), st.sampled_from(INTERESTING)), max_size=5))
        elif lie == 1:
            dims = draw(st.lists(st.one_of(st.integers(-2, 64), st.sampled_from(INTERESTING)), max_size=10))
        elif lie == 2:
            ritem = draw(st.sampled_from([I64, U32, F32, U8, BOOL]))
            ditem = draw(st.sampled_from([U64, I32, F64, I64]))
        elif lie == 3 and dims:
            dims[draw(st.integers(0, len(dims) - 1))] = draw(st.sampled_from(INTERESTING))
        kvs.append(_kv("audiocpp.tensor_ranks", ARRAY, _num_array(ritem, ranks)))
        if dims or draw(st.booleans()):
            kvs.append(_kv("audiocpp.tensor_shapes", ARRAY, _num_array(ditem, dims)))
    if draw(st.booleans()):
        names = draw(st.lists(NAMES, max_size=4))
        kvs.append(_kv("audiocpp.embedded_files.names", ARRAY, _str_array(names)))
        if draw(st.integers(0, 3)):
            data = draw(st.binary(max_size=40))
            cuts = sorted(draw(st.lists(st.integers(0, len(data)), min_size=len(names), max_size=len(names))))
            offs = [0, *cuts[1:], len(data)] if names else [0]
            item = U64
            if not draw(st.integers(0, 2)):
                item = draw(st.sampled_from([U64, I64, I32, F32]))
                offs = draw(st.lists(st.one_of(st.integers(-4, 40), st.sampled_from(INTERESTING)),
                                     max_size=6))
            kvs.append(_kv("audiocpp.embedded_files.offsets", ARRAY, _num_array(item, offs)))
            kvs.append(_kv("audiocpp.embedded_files.data", ARRAY,
                           _num_array(draw(st.sampled_from([U8, U8, I8, U32])), list(data))))
        elif draw(st.booleans()):
            kind, body = draw(value())
            kvs.append(_kv("audiocpp.embedded_files.contents", kind, body))
        else:
            texts = draw(st.lists(st.text(max_size=8), min_size=len(names), max_size=len(names) + 1))
            kvs.append(_kv("audiocpp.embedded_files.contents", ARRAY, _str_array(texts)))
    if draw(st.booleans()):
        version_type = draw(st.sampled_from([U32, U32, I32, STRING]))
        version = (gguf_string("1") if version_type == STRING
                   else scalar(version_type, draw(st.sampled_from([1, 1, 0, 2]))))
        kvs.append(_kv("audiocpp.model_spec.version", version_type, version))
        kvs.append(_kv("audiocpp.model_spec.family", STRING,
                       gguf_string(draw(st.sampled_from(["omnivoice", "", "x"])))))
        spec = draw(st.one_of(st.sampled_from(['{"family": "omnivoice"}', "[]", "{", '{"a": ' * 50, "null",
                                               "1e999", '{"family": 1}', "9" * 5000, "[" * 5000]),
                              st.text(max_size=30)))
        kvs.append(_kv("audiocpp.model_spec.json", STRING, gguf_string(spec)))
    return kvs
