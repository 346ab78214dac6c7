"""PyTorch checkpoints through torch.load(weights_only=True) only; HF folders; path errors."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from audiocpp.engine.errors import ModelError
from audiocpp.engine.weights import FolderSource, TorchSource, open_weights


class Evil:
    """Unpickling this would run code; weights_only must refuse it."""

    def __reduce__(self):
        return (print, ("pwned",))


def _state() -> dict[str, torch.Tensor]:
    return {"enc.weight": torch.randn(3, 4), "enc.bias": torch.zeros(3, dtype=torch.float16),
            "count": torch.tensor(5)}


@pytest.mark.parametrize("suffix", [".pth", ".bin", ".pt"])
@pytest.mark.parametrize("wrapper", [None, "state_dict", "model"])
def test_state_dict_and_wrappers(tmp_path: Path, suffix: str, wrapper: str | None) -> None:
    state = _state()
    obj = state if wrapper is None else {wrapper: state, "epoch": 3, "config": {"lr": 0.1}}
    path = tmp_path / f"ckpt{suffix}"
    torch.save(obj, path)
    src = open_weights(path)
    assert isinstance(src, TorchSource) and src.format == "pytorch"
    assert src.names() == list(state)
    for name, tensor in state.items():
        assert torch.equal(src.get(name), tensor) and src.get(name).dtype == tensor.dtype
    assert src.info("enc.bias").dtype == "F16" and src.info("count").shape == ()


def test_legacy_non_zip_format(tmp_path: Path) -> None:
    path = tmp_path / "old.pth"
    state = _state()
    torch.save(collections.OrderedDict(state), path, _use_new_zipfile_serialization=False)
    src = open_weights(path)
    assert src.names() == list(state)
    assert all(torch.equal(src.get(n), t) for n, t in state.items())


def test_pickled_objects_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "evil.pth"
    torch.save({"state_dict": _state(), "hook": Evil()}, path)
    with pytest.raises(ModelError) as err:
        open_weights(path)
    text = str(err.value)
    assert "cannot be loaded safely" in text and "safetensors" in text
    assert "pwned" not in capsys.readouterr().out


def test_unreadable_or_empty_checkpoints(tmp_path: Path) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00not a checkpoint at all")
    with pytest.raises(ModelError, match="junk.bin"):
        open_weights(junk)
    nothing = tmp_path / "nothing.pth"
    torch.save({"epoch": 1}, nothing)
    with pytest.raises(ModelError, match="holds no state dict"):
        open_weights(nothing)


def test_hf_folder(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "x"}))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "tokenizer.json").write_text("{}")
    torch.save(_state(), tmp_path / "pytorch_model.bin")
    src = open_weights(tmp_path)
    assert isinstance(src, FolderSource) and src.format == "folder"
    assert src.checkpoint.name == "pytorch_model.bin" and src.names() == list(_state())
    assert sorted(src.files) == ["config.json", "sub/tokenizer.json"]
    save_file({"only": torch.ones(1)}, str(tmp_path / "model.safetensors"))
    assert open_weights(tmp_path).names() == ["only"]  # model.safetensors is preferred


def test_path_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        open_weights(tmp_path / "missing.safetensors")
    odd = tmp_path / "weights.npz"
    odd.write_bytes(b"PK")
    with pytest.raises(ModelError, match=r"unknown weights format \(\.npz\)"):
        open_weights(odd)
    with pytest.raises(ModelError, match="holds no root checkpoint"):
        open_weights(tmp_path)
