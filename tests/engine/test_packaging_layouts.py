"""Upstream folder layouts mapped by the built-in specs: torch checkpoints, equivalents, mixes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from audiocpp.engine.errors import ModelError, UsageError
from audiocpp.engine.packaging import MODEL_INPUT, plan_from_spec, write_package
from audiocpp.engine.spec.validate import builtin_spec_path, load_spec_file
from audiocpp.engine.weights.open import open_weights


def _lm(g: torch.Generator) -> dict[str, torch.Tensor]:
    return {"base_lm.embed_tokens.weight": torch.randn(40, 64, generator=g),
            "base_lm.layers.0.mlp.up_proj.weight": torch.randn(128, 64, generator=g),
            "base_lm.norm.weight": torch.ones(64)}


def _vae(g: torch.Generator) -> dict[str, torch.Tensor]:
    return {"encoder.block.0.weight_v": torch.randn(16, 8, 7, generator=g),
            "encoder.block.0.weight_g": torch.rand(16, 1, 1, generator=g),
            "encoder.block.0.bias": torch.randn(16, generator=g),
            "encoder.snake.alpha": torch.rand(1, 16, 1, generator=g)}


def _sidecars(folder: Path) -> None:
    (folder / "config.json").write_text(json.dumps({"architecture": "voxcpm"}), encoding="utf-8")
    (folder / "tokenizer.json").write_text("{}", encoding="utf-8")
    (folder / "tokenizer_config.json").write_text("{}", encoding="utf-8")


def test_voxcpm1_pytorch_checkpoints(tmp_path: Path) -> None:
    """VoxCPM-0.5B: pytorch_model.bin and audiovae.pth, both {"state_dict": ...}."""
    g = torch.Generator().manual_seed(0)
    folder = tmp_path / "VoxCPM-0.5B"
    folder.mkdir()
    lm, vae = _lm(g), _vae(g)
    torch.save({"state_dict": lm}, folder / "pytorch_model.bin")
    torch.save({"state_dict": vae}, folder / "audiovae.pth")
    _sidecars(folder)
    spec = load_spec_file(builtin_spec_path("voxcpm1"))
    plan = plan_from_spec(spec, {MODEL_INPUT: folder})
    assert plan.source_paths == {"weights": "pytorch_model.bin", "audiovae_weights": "audiovae.pth"}
    out = tmp_path / "voxcpm1-q8_0.gguf"
    write_package(plan, out, "q8_0")
    source = open_weights(out)
    assert source.info("weights/base_lm.layers.0.mlp.up_proj.weight").dtype == "Q8_0"
    assert source.info("weights/base_lm.embed_tokens.weight").dtype == "F16"  # spec lookup table
    for name, t in vae.items():  # spec keeps audiovae_weights at f32, unfolded, exact shapes
        got = source.get(f"audiovae_weights/{name}")
        assert source.info(f"audiovae_weights/{name}").dtype == "F32" and torch.equal(got, t), name
    assert sorted(source.embedded_file_names()) == ["config.json", "tokenizer.json", "tokenizer_config.json"]


def test_voxcpm2_safetensors_beside_the_pth_name(tmp_path: Path) -> None:
    """The spec names audiovae.pth; an audiovae.safetensors is accepted, as the loader accepts it."""
    g = torch.Generator().manual_seed(1)
    folder = tmp_path / "VoxCPM2"
    folder.mkdir()
    save_file(_lm(g), str(folder / "model.safetensors"))
    save_file(_vae(g), str(folder / "audiovae.safetensors"))
    _sidecars(folder)
    (folder / "special_tokens_map.json").write_text('{"bos_token": "<s>"}', encoding="utf-8")
    plan = plan_from_spec(load_spec_file(builtin_spec_path("voxcpm2")), {MODEL_INPUT: folder})
    assert plan.source_paths["audiovae_weights"] == "audiovae.safetensors"
    assert "special_tokens_map.json" in plan.files  # optional file, present
    out = tmp_path / "v2.gguf"
    write_package(plan, out, "bf16")
    source = open_weights(out)
    assert source.info("weights/base_lm.layers.0.mlp.up_proj.weight").dtype == "BF16"
    assert source.info("audiovae_weights/encoder.block.0.weight_v").shape == (16, 8, 7)


def test_folder_plus_an_explicit_namespace(tmp_path: Path) -> None:
    """A folder that lacks one namespace is completed by an explicit NS=PATH input."""
    g = torch.Generator().manual_seed(2)
    folder = tmp_path / "VoxCPM2"
    folder.mkdir()
    save_file(_lm(g), str(folder / "model.safetensors"))
    _sidecars(folder)
    elsewhere = tmp_path / "vae.pth"
    torch.save(_vae(g), elsewhere)
    spec = load_spec_file(builtin_spec_path("voxcpm2"))
    with pytest.raises(ModelError, match="audiovae"):
        plan_from_spec(spec, {MODEL_INPUT: folder})
    plan = plan_from_spec(spec, {MODEL_INPUT: folder, "audiovae_weights": elsewhere})
    assert plan.source_paths["audiovae_weights"] == str(elsewhere.resolve())
    write_package(plan, tmp_path / "x.gguf", "f16")


def test_a_single_weights_file_cannot_fill_two_namespaces(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    save_file({"a.weight": torch.randn(2, 32)}, str(path))
    with pytest.raises(UsageError, match="single weights file"):
        plan_from_spec(load_spec_file(builtin_spec_path("voxcpm2")), {MODEL_INPUT: path})
