"""Every layout of a VoxCPM2 model loads to the same model: the HF folder (model.safetensors +
audiovae.pth), our package GGUF (F32; BF16/F16/Q8_0 with the VAE kept F32) and a GGUF laid out
as audio.cpp's packager lays it out (written here independently of our packager). Also the
strict-loading errors and the lazy per-dtype generator."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from audiocpp.engine.errors import ModelError
from audiocpp.engine.packaging.cli import package_from_cli
from audiocpp.engine.records import TaskRequest
from audiocpp.engine.weights import open_weights
from audiocpp.families.voxcpm2 import plugin
from tests.engine.weights_builders import write_package

REQUEST = dict(text="Hello world. 你好世界。", seed=42,
               options={"max_tokens": 12, "min_tokens": 11, "retry_badcase": False})


def synth(path: Path, **session_options):
    model = plugin.load(path)
    result = model.session("tts", **session_options).run(TaskRequest(**REQUEST))
    return result.details["latents"][0], result.audio.samples


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.fixture(scope="module")
def packages(tiny_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("voxcpm2-packages")
    out = {}
    for kind in ("f32", "bf16", "f16", "q8_0"):
        out[kind] = root / f"tiny-{kind}.gguf"
        package_from_cli(out=out[kind], inputs=[str(tiny_ckpt)], spec=None, family="voxcpm2",
                         weight_type=kind, keep_types=[], overwrite=False)
    return out


@pytest.fixture(scope="module")
def audiocpp_layout(tiny_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model as audio.cpp's ``audiocpp_gguf`` packs VoxCPM2: upstream names under
    ``weights/`` and ``audiovae_weights/`` (VAE unfolded, from audiovae.safetensors), long
    names aliased ``_audiocpp.N``, sidecars embedded, audio.cpp's own spec embedded."""
    tensors = {f"weights/{k}": v.numpy() for k, v in load_file(str(tiny_ckpt / "model.safetensors")).items()}
    vae = torch.load(tiny_ckpt / "audiovae.pth", weights_only=True)["state_dict"]
    tensors.update({f"audiovae_weights/{k}": v.numpy() for k, v in vae.items()})
    files = {name: (tiny_ckpt / name).read_bytes()
             for name in ("config.json", "tokenizer.json", "tokenizer_config.json",
                          "special_tokens_map.json")}
    spec = {"schema_version": 1, "family": "voxcpm2", "display_name": "VoxCPM2", "tasks": ["tts"]}
    path = tmp_path_factory.mktemp("voxcpm2-audiocpp") / "voxcpm2-orig.gguf"
    return write_package(path, tensors, files=files, spec=spec)


def test_package_layout(packages: dict[str, Path]) -> None:
    source = open_weights(packages["q8_0"])
    assert set(source.namespaces()) == {"weights", "audiovae_weights"}
    dtypes = {name: source.info(name).dtype for name in source.names()}
    vae = {d for n, d in dtypes.items()
           if n.startswith("audiovae_weights/") and not n.endswith("sr_bin_boundaries")}
    assert vae == {"F32"}, "the AudioVAE stays F32 by the spec's quantization policy"
    assert "audiovae_weights/decoder.model.0.weight_g" in dtypes, "weight-norm pairs are stored unfolded"
    assert dtypes["weights/base_lm.layers.0.mlp.up_proj.weight"] == "Q8_0"
    assert {"config.json", "tokenizer.json"} <= set(source.files)


def test_layouts_load_to_identical_outputs(tiny_ckpt: Path, packages: dict[str, Path],
                                           audiocpp_layout: Path) -> None:
    latents, audio = synth(tiny_ckpt)
    for path in (packages["f32"], audiocpp_layout):
        other_latents, other_audio = synth(path)
        assert np.array_equal(other_latents, latents), path.name
        assert np.array_equal(other_audio, audio), path.name


@pytest.mark.parametrize("kind", ["bf16", "f16", "q8_0"])
def test_reduced_precision_packages_drift_little(kind: str, tiny_ckpt: Path,
                                                 packages: dict[str, Path]) -> None:
    latents, audio = synth(tiny_ckpt)
    other_latents, other_audio = synth(packages[kind], compute_dtype="float32")  # the storage alone
    assert other_latents.shape == latents.shape
    assert 0 < np.abs(other_latents - latents).max() < 0.1
    assert cosine(other_audio, audio) > 0.999


def test_bfloat16_compute_drifts_little(tiny_ckpt: Path) -> None:
    latents, audio = synth(tiny_ckpt)
    bf_latents, bf_audio = synth(tiny_ckpt, compute_dtype="bfloat16")
    assert bf_latents.shape == latents.shape
    assert 0 < np.abs(bf_latents - latents).max() < 0.2
    assert cosine(bf_audio, audio) > 0.999


def test_generator_weights_load_per_dtype_on_first_use(tiny_ckpt: Path) -> None:
    model = plugin.load(tiny_ckpt)
    assert set(model._generators) == set()
    model.session("tts", compute_dtype="bf16")
    assert [mode.name for mode in model._generators] == ["bfloat16"]
    assert model.generator_for(torch.bfloat16).model.base_lm.norm.weight.dtype == torch.bfloat16
    assert next(model.parts.codec.parameters()).dtype == torch.float32


def test_missing_tensor_is_named(tiny_ckpt: Path, tmp_path: Path) -> None:
    from safetensors.torch import save_file

    broken = tmp_path / "broken"
    shutil.copytree(tiny_ckpt, broken)
    state = load_file(str(broken / "model.safetensors"))
    del state["stop_head.weight"]
    save_file(state, str(broken / "model.safetensors"))
    with pytest.raises(ModelError, match="stop_head.weight"):
        plugin.load(broken)


def test_wrong_architecture_is_refused(tiny_ckpt: Path, tmp_path: Path) -> None:
    other = tmp_path / "v1"
    shutil.copytree(tiny_ckpt, other)
    config = json.loads((other / "config.json").read_text())
    config["architecture"] = "voxcpm"
    (other / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelError, match="voxcpm1"):
        plugin.load(other, None)


def test_pytorch_model_bin_folder_loads_the_same(tiny_ckpt: Path, tmp_path: Path) -> None:
    """Upstream falls back to ``pytorch_model.bin`` (``{"state_dict": ...}``) without safetensors."""
    folder = tmp_path / "bin"
    shutil.copytree(tiny_ckpt, folder)
    state = load_file(str(folder / "model.safetensors"))
    torch.save({"state_dict": state}, folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    latents, audio = synth(tiny_ckpt)
    other_latents, other_audio = synth(folder)
    assert np.array_equal(other_latents, latents) and np.array_equal(other_audio, audio)


def test_q8_0_blocks_in_one_call_give_the_python_blocks_bits(packages: dict[str, Path], monkeypatch) -> None:
    """The LocDiT, LocEnc and LM stacks (prefill, decode steps; a batch's rows at other positions of
    their own caches) of a Q8_0 package in ``float32-stored`` (``auto`` where the CPU has no bf16
    arithmetic) run as one kernel call each (engine.nn.layers.q8_block): the same latents and audio as the
    Python blocks, alone and batched."""
    from audiocpp.engine.nn.layers import q8_block

    if q8_block.kernel() is None:
        pytest.skip("the Q8_0 block kernel is not built here")
    taken, real = [], q8_block.run_stack

    def counted(*args, **kwargs):
        out = real(*args, **kwargs)
        taken.append(out is not None)
        return out

    def batch() -> list[np.ndarray]:
        session = plugin.load(packages["q8_0"]).session("tts", compute_dtype="float32-stored")
        requests = [TaskRequest(**{**REQUEST, "text": text}) for text in ("Hi.", "A longer sentence here.")]
        return [result.audio.samples for result in session.run_batch(requests)]

    monkeypatch.setattr(q8_block, "run_stack", counted)
    latents, audio = synth(packages["q8_0"], compute_dtype="float32-stored")
    batched = batch()
    assert taken and all(taken)
    monkeypatch.setattr(q8_block, "run_stack", lambda *args, **kwargs: None)
    python_latents, python_audio = synth(packages["q8_0"], compute_dtype="float32-stored")
    assert np.array_equal(latents, python_latents) and np.array_equal(audio, python_audio)
    assert all(np.array_equal(a, b) for a, b in zip(batched, batch(), strict=True))
