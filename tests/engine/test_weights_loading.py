"""Strict loading: missing, unexpected and misshapen tensors are named; loading is in place."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from audiocpp.engine.errors import ModelError
from audiocpp.engine.weights import Drop, Rename, adapt, load_module_weights, open_weights


class Net(nn.Module):
    def __init__(self, width: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, width)
        self.proj = nn.Linear(width, 3)
        self.norm = nn.BatchNorm1d(3)
        self.register_buffer("steps", torch.arange(5), persistent=True)
        self.register_buffer("cache", torch.zeros(2), persistent=False)


def _save(tmp_path: Path, state: dict[str, torch.Tensor], name: str = "w.safetensors") -> Path:
    path = tmp_path / name
    save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    return path


def _reference() -> dict[str, torch.Tensor]:
    torch.manual_seed(1)
    return {k: v.clone() for k, v in Net().state_dict().items()}


def test_loads_parameters_and_persistent_buffers_in_place(tmp_path: Path) -> None:
    state = {k: (v + 1 if v.is_floating_point() else v + 7) for k, v in _reference().items()}
    src = open_weights(_save(tmp_path, state))
    net = Net()
    before = {k: v.data_ptr() for k, v in net.state_dict().items()}
    load_module_weights(net, src)
    for k, v in net.state_dict().items():
        assert torch.equal(v, state[k]), k
        assert v.data_ptr() == before[k], k  # copied into the module's own storage
    assert "cache" not in state and torch.equal(net.cache, torch.zeros(2))


def test_error_names_missing_unexpected_and_misshapen(tmp_path: Path) -> None:
    state = _reference()
    del state["proj.bias"], state["steps"]
    state["extra.weight"] = torch.ones(1)
    state["embed.weight"] = torch.ones(10, 5)
    src = open_weights(_save(tmp_path, state))
    with pytest.raises(ModelError) as err:
        load_module_weights(Net(), src, what="codec")
    text = str(err.value)
    assert "codec weights" in text and "w.safetensors" in text
    assert "2 missing from the weights: steps, proj.bias" in text
    assert "1 unexpected (not in the model): extra.weight" in text
    assert "embed.weight (weights (10, 5), model (10, 4))" in text
    assert "hint:" in text


def test_long_lists_are_cut_with_a_count(tmp_path: Path) -> None:
    state = _reference()
    for i in range(25):
        state[f"junk.{i}"] = torch.ones(1)
    with pytest.raises(ModelError) as err:
        load_module_weights(Net(), open_weights(_save(tmp_path, state)))
    text = str(err.value)
    assert "25 unexpected" in text and text.count("junk.") == 10 and "and 15 more" in text


def test_ignore_globs_and_adapters(tmp_path: Path) -> None:
    state = {f"model.{k}": v for k, v in _reference().items()}
    state["model.rotary.inv_freq"] = torch.ones(2)
    src = open_weights(_save(tmp_path, state))
    net = Net()
    load_module_weights(net, adapt(src, [Rename(r"^model\.", ""), Drop("rotary.*")]))
    assert torch.equal(net.proj.weight, state["model.proj.weight"])
    partial = {k: v for k, v in _reference().items() if not k.startswith("norm.")}
    load_module_weights(Net(), open_weights(_save(tmp_path, partial, "p.safetensors")), ignore=["norm.*"])


def test_dtype_conversion(tmp_path: Path) -> None:
    state = _reference()
    src = open_weights(_save(tmp_path, {k: (v.half() if v.is_floating_point() else v)
                                        for k, v in state.items()}))
    net = Net()
    load_module_weights(net, src)  # F16 storage into a float32 module: cast on copy
    assert net.proj.weight.dtype == torch.float32
    torch.testing.assert_close(net.proj.weight, state["proj.weight"].half().float(), rtol=0, atol=0)
    half = Net()
    load_module_weights(half, src, dtype=torch.float16)
    assert half.proj.weight.dtype == torch.float16 and half.steps.dtype == torch.int64
    assert torch.equal(half.proj.weight, state["proj.weight"].half())


def test_meta_modules_get_the_tensors_assigned_and_ties_kept(tmp_path: Path) -> None:
    class Tied(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(6, 4)
            self.head = nn.Linear(4, 6, bias=False)
            self.head.weight = self.embed.weight

    with torch.device("meta"):
        net = Tied()
    weight = torch.randn(6, 4)
    src = open_weights(_save(tmp_path, {"embed.weight": weight, "head.weight": weight.clone()}))
    load_module_weights(net, src)
    assert net.embed.weight.device.type == "cpu" and torch.equal(net.embed.weight, weight)
    assert net.head.weight is net.embed.weight and isinstance(net.head.weight, nn.Parameter)
