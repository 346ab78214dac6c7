"""engine.nn.build: compute dtypes, build on meta + strict load, one network per dtype."""

from __future__ import annotations

import threading
import time

import pytest
import torch
from torch import nn

from audiocpp.engine.device import torch_dtype
from audiocpp.engine.errors import ModelError
from audiocpp.engine.nn.build import PerDtype, build_on_meta, load_on_meta, materialize
from audiocpp.engine.spec.model_spec import PRESET_SPELLINGS, PRESETS
from audiocpp.engine.weights.source import TensorInfo, TensorSource


class DictSource(TensorSource):
    format = "dict"

    def __init__(self, tensors: dict[str, torch.Tensor]) -> None:
        self.tensors, self.metadata, self.files, self.path = tensors, {}, {}, None

    def names(self) -> list[str]:
        return list(self.tensors)

    def info(self, name: str) -> TensorInfo:
        t = self.tensors[name]
        return TensorInfo(name, tuple(t.shape), str(t.dtype))

    def get(self, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
        t = self.tensors[name]
        return t if dtype is None else t.to(dtype)

    def describe(self) -> str:
        return "a test dict"


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.register_buffer("table", torch.zeros(4, dtype=torch.int64))
        self.register_buffer("derived", torch.arange(2, device="cpu"), persistent=False)


def weights(dtype: torch.dtype = torch.bfloat16) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return {"lin.weight": torch.randn(2, 3, generator=gen).to(dtype),
            "lin.bias": torch.randn(2, generator=gen).to(dtype),
            "table": torch.arange(4)}


@pytest.mark.parametrize("name, dtype", [
    (None, torch.float32), ("", torch.float32), ("float32", torch.float32), ("fp32", torch.float32),
    ("float", torch.float32), ("bfloat16", torch.bfloat16), ("bf16", torch.bfloat16),
    ("BF16", torch.bfloat16), ("float16", torch.float16), ("fp16", torch.float16), ("half", torch.float16),
    (torch.float16, torch.float16),
])
def test_torch_dtype(name, dtype) -> None:
    assert torch_dtype(name) is dtype


def test_torch_dtype_refuses_unknown_names() -> None:
    with pytest.raises(ValueError, match="unknown compute dtype 'int8'"):
        torch_dtype("int8")


def test_every_spelling_names_a_preset_value() -> None:
    for preset, spellings in PRESET_SPELLINGS.items():
        assert set(spellings.values()) == set(PRESETS[preset])
        assert all(spellings[v] == v for v in PRESETS[preset])


def test_load_on_meta_loads_strictly_in_the_dtype() -> None:
    src = weights()
    net = load_on_meta(Net, DictSource(src), dtype=torch.float32, what="test net")
    assert net.lin.weight.dtype == torch.float32 and net.lin.weight.device.type == "cpu"
    assert torch.equal(net.lin.weight, src["lin.weight"].float())
    assert torch.equal(net.table, torch.arange(4)) and net.table.dtype == torch.int64
    assert torch.equal(net.derived, torch.arange(2))  # made on the CPU, not on meta
    half = load_on_meta(Net, DictSource(weights(torch.float32)), dtype=torch.bfloat16)
    assert half.lin.weight.dtype == torch.bfloat16 and half.table.dtype == torch.int64


def test_load_on_meta_names_missing_and_unexpected_tensors() -> None:
    src = weights()
    del src["lin.bias"]
    src["extra"] = torch.zeros(1)
    with pytest.raises(ModelError,
                       match="test net weights.*missing from the weights: lin.bias.*unexpected.*extra"):
        load_on_meta(Net, DictSource(src), what="test net")


def test_materialize_refuses_what_was_not_loaded() -> None:
    class Lazy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("scratch", torch.zeros(3), persistent=False)

    with pytest.raises(ModelError, match="lazy tensor 'scratch' was not loaded"):
        materialize(build_on_meta(Lazy), what="lazy")


def test_per_dtype_makes_each_once() -> None:
    made: list[torch.dtype] = []
    ready = object()

    def make(dtype: torch.dtype) -> object:
        made.append(dtype)
        time.sleep(0.01)
        return object()

    cache = PerDtype(make, {torch.float32: ready})
    assert cache.get(torch.float32) is ready and made == []
    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(cache.get(torch.bfloat16))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert made == [torch.bfloat16] and len({id(r) for r in results}) == 1
    assert torch.bfloat16 in cache and len(cache) == 2 and set(cache) == {torch.float32, torch.bfloat16}
