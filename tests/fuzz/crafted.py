"""Hand-made hostile files: the findings of the fuzzers, kept as exact inputs."""

from __future__ import annotations

from . import gguf_raw as g
from .mutate import u32, u64


def gguf(kvs: list[bytes], infos: list[bytes] = (), data: bytes = b"", *, n_tensors: int | None = None,
         n_kv: int | None = None) -> bytes:
    head = (b"GGUF" + u32(3) + u64(len(infos) if n_tensors is None else n_tensors)
            + u64(len(kvs) if n_kv is None else n_kv) + b"".join(kvs) + b"".join(infos))
    return head + b"\0" * ((-len(head)) % 32) + data


def info(name: str, ne: list[int], ggml_type: int = 0, offset: int = 0) -> bytes:
    return g.gguf_string(name) + u32(len(ne)) + b"".join(u64(d) for d in ne) + u32(ggml_type) + u64(offset)


def kv(key: str, vtype: int, body: bytes) -> bytes:
    return g._kv(key, vtype, body)


def string(key: str, text: str) -> bytes:
    return kv(key, g.STRING, g.gguf_string(text))


def strings(key: str, items: list[str]) -> bytes:
    return kv(key, g.ARRAY, g._str_array(items))


def numbers(key: str, item: int, values: list[float]) -> bytes:
    return kv(key, g.ARRAY, g._num_array(item, values))


PACKAGE = string("general.architecture", "audiocpp")


def nested_arrays(depth: int) -> bytes:
    """An array of an array of ... (``depth`` levels), each holding one item."""
    body = u32(g.U8) + u64(0)
    for _ in range(depth):
        body = u32(g.ARRAY) + u64(1) + body
    return kv("x.nested", g.ARRAY, body)
