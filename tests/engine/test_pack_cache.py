"""engine.nn.linear.pack_cache: the first load of a Q8_0 / Q4_0 package writes its matrices in the kernel's
layout to the cache; later loads map them (no packing) and compute the same bits; a changed package,
a damaged cache file or ``AUDIOCPP_PACK_CACHE=0`` never gives stale or wrong matrices."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from audiocpp.engine.nn.kernels import jit
from audiocpp.engine.nn.linear import pack_cache
from audiocpp.engine.nn.linear import q8_0_linear as q8
from audiocpp.engine.nn.linear.choice import quantize_linears
from audiocpp.engine.weights import open_weights
from tests.engine.weights_builders import write_gguf

pytestmark = pytest.mark.skipif(
    q8.KERNEL.off() or (q8.KERNEL.unsupported() or jit.toolchain_missing()) is not None,
    reason="the Q8_0 kernel cannot run here")


@pytest.fixture
def cache(monkeypatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("AUDIOCPP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(pack_cache.SWITCH, raising=False)
    return tmp_path / "cache" / "packed"


def _package(path: Path, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    tensors = {"a.weight": rng.standard_normal((48, 64)).astype(np.float32),
               "b.weight": rng.standard_normal((40, 96)).astype(np.float32)}
    return write_gguf(path, tensors, types={"a.weight": "Q8_0", "b.weight": "Q4_0"})


def _load(path: Path) -> torch.nn.Module:
    """What a process does: quantize the linears of a net from a package."""
    net = torch.nn.ModuleDict({"a": torch.nn.Linear(64, 48, bias=False),
                               "b": torch.nn.Linear(96, 40, bias=False)})
    done = quantize_linears(net, open_weights(path))
    assert sorted(done) == ["a.weight", "b.weight"]
    return net


def _outputs(net: torch.nn.Module) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    return [net["a"](torch.randn(5, 64, generator=gen)), net["b"](torch.randn(5, 96, generator=gen))]


def _no_packing(monkeypatch) -> None:
    def refuse(*_args: object) -> None:
        raise AssertionError("packed although the cache holds the matrix")

    monkeypatch.setattr(q8, "_kernel", lambda: _Refusing(q8.kernel(), refuse))


class _Refusing:
    def __init__(self, op: object, refuse: object) -> None:
        self._op, self.pack_blocks_into = op, refuse

    def __getattr__(self, name: str) -> object:
        return getattr(self._op, name)


def test_a_second_load_maps_the_packed_matrices_and_computes_the_same_bits(cache: Path, tmp_path: Path,
                                                                            monkeypatch) -> None:
    path = _package(tmp_path / "m.gguf", seed=0)
    first = _load(path)
    files = list(cache.glob("*.pack"))
    assert len(files) == 1 and files[0].stat().st_size >= 48 * 64 // 32 * 34
    _no_packing(monkeypatch)
    second = _load(path)
    for name in ("a", "b"):
        assert torch.equal(second[name].packed, first[name].packed)
        assert torch.equal(second[name].scales, first[name].scales)
        assert second[name].packed.data_ptr() != first[name].packed.data_ptr()
    assert all(torch.equal(x, y) for x, y in zip(_outputs(first), _outputs(second)))
    assert list(cache.glob("*.pack")) == files  # nothing new written


def test_a_changed_package_is_packed_again_and_its_old_file_removed(cache: Path, tmp_path: Path) -> None:
    path = _package(tmp_path / "m.gguf", seed=0)
    _load(path)
    old = set(cache.glob("*.pack"))
    prefix = next(iter(old)).name.split("-")[0]
    killed, fresh_tmp = cache / f".{prefix}-a.pack.1.tmp", cache / f".{prefix}-b.pack.2.tmp"
    for left in (killed, fresh_tmp):  # left by processes killed while writing: a day ago, and now
        left.write_bytes(b"partial")
    os.utime(killed, (0, 0))
    _package(tmp_path / "other.gguf", seed=1).replace(path)  # another version at the same path
    net = _load(path)
    fresh = _load(tmp_path / "m.gguf")
    reference = open_weights(path)
    assert torch.equal(net["a"].dequantized(), reference.get("a.weight"))
    assert torch.equal(fresh["b"].values(), torch.from_numpy(reference.blocks("b.weight").values()))
    now = set(cache.glob("*.pack"))
    assert len(now) == 1 and not now & old
    assert not killed.exists() and fresh_tmp.exists()  # another process may still be writing that one


def test_a_package_rewritten_in_place_with_its_old_times_is_not_served_stale(cache: Path,
                                                                            tmp_path: Path) -> None:
    path = _package(tmp_path / "m.gguf", seed=0)
    _load(path)
    info = path.stat()
    replacement = _package(tmp_path / "new.gguf", seed=2).read_bytes()
    with open(path, "r+b") as fh:  # same inode, same size
        fh.write(replacement)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))  # and the old modification time
    net = _load(path)
    assert torch.equal(net["a"].dequantized(), open_weights(path).get("a.weight"))


def _bad_index(data: bytes, entry: dict) -> bytes:
    """The cache file ``data`` with its first entry's fields replaced by ``entry``'s."""
    import json
    import struct

    head = len(pack_cache.MAGIC) + 8
    (length,) = struct.unpack("<Q", data[len(pack_cache.MAGIC):head])
    index = json.loads(data[head:head + length])
    index["entries"][0].update(entry)
    body = json.dumps(index).encode()
    return pack_cache.MAGIC + struct.pack("<Q", len(body)) + body + data[head + length:]


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "negative offset", "no bytes",
                                    "text offset", "not a list"])
def test_a_damaged_cache_file_is_ignored(cache: Path, tmp_path: Path, damage: str) -> None:
    path = _package(tmp_path / "m.gguf", seed=0)
    first = _load(path)
    (file,) = cache.glob("*.pack")
    data = file.read_bytes()
    damaged = {"truncated": lambda: data[: len(data) // 2], "garbage": lambda: os.urandom(len(data)),
               "empty": lambda: b"",
               "negative offset": lambda: _bad_index(data, {"packed": [-10**9, 512]}),
               "no bytes": lambda: _bad_index(data, {"scales": [0, 0]}),
               "text offset": lambda: _bad_index(data, {"offset": "a"}),
               "not a list": lambda: _bad_index(data, {"packed": 7})}
    file.write_bytes(damaged[damage]())
    again = _load(path)
    assert all(torch.equal(x, y) for x, y in zip(_outputs(first), _outputs(again)))


def test_off_or_unwritable_the_cache_writes_nothing_and_loads_work(cache: Path, tmp_path: Path,
                                                                    monkeypatch) -> None:
    path = _package(tmp_path / "m.gguf", seed=0)
    monkeypatch.setenv(pack_cache.SWITCH, "0")
    reference = _outputs(_load(path))
    assert not cache.exists()
    monkeypatch.delenv(pack_cache.SWITCH)
    cache.parent.mkdir(parents=True)
    cache.write_text("a file where the folder should be")
    assert all(torch.equal(x, y) for x, y in zip(reference, _outputs(_load(path))))


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads Linux's /proc/self/maps")
def test_an_unloaded_model_leaves_no_cache_file_mapped(cache: Path, tmp_path: Path) -> None:
    import gc

    path = _package(tmp_path / "m.gguf", seed=0)
    _load(path)
    (file,) = cache.glob("*.pack")

    def mapped() -> bool:
        return str(file) in Path("/proc/self/maps").read_text()

    net = _load(path)
    assert mapped()
    del net
    gc.collect()
    assert not mapped()


def test_two_threads_loading_at_once_leave_one_valid_file(cache: Path, tmp_path: Path, monkeypatch) -> None:
    from concurrent.futures import ThreadPoolExecutor

    path = _package(tmp_path / "m.gguf", seed=0)
    with ThreadPoolExecutor(2) as pool:
        nets = list(pool.map(_load, [path, path]))
    assert all(torch.equal(x, y) for x, y in zip(_outputs(nets[0]), _outputs(nets[1])))
    assert len(list(cache.glob("*.pack"))) == 1 and not list(cache.glob(".*.tmp"))
    _no_packing(monkeypatch)
    assert all(torch.equal(x, y) for x, y in zip(_outputs(nets[0]), _outputs(_load(path))))
