"""Audio8 TTS load paths: the HF folder, our package GGUF and audio.cpp's package layout give the
same audio; Q8_0 / BF16 packages drift within bounds (lookup tables kept unquantized); codec
checkpoints wrapped as upstream's ``load_codec`` accepts them; clear errors for broken inputs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from audiocpp.engine.errors import ModelError
from audiocpp.engine.records import TaskRequest
from audiocpp.engine.registry import detect_family
from audiocpp.families.audio8_tts import plugin
from tests.support import one_torch_thread

from .cases import cosine

_one_thread = pytest.fixture(autouse=True, scope="module")(one_torch_thread)
TEXT = "Hello world. This is a test."


def synth(model, seed: int = 7, compute_dtype: str = "float32", **options) -> tuple[np.ndarray, np.ndarray]:
    # float32: packages compared as stored (compute_dtype=auto runs 16-bit/quantized packages in bfloat16)
    result = model.session("tts", compute_dtype=compute_dtype).run(
        TaskRequest(text=TEXT, seed=seed, options={"max_new_tokens": 30, **options}))
    return result.details["codes"][0], result.audio.samples


@pytest.fixture(scope="module")
def folder_output(tiny):
    return synth(tiny)


@pytest.mark.parametrize("layout", ["f32", "audiocpp"])
def test_packages_give_the_folders_audio(layout: str, packages, folder_output) -> None:
    model = plugin.load(packages[layout])
    assert model.parts.layout == "package" and model.parts.source_id == "package"
    codes, audio = synth(model)
    assert np.array_equal(codes, folder_output[0])
    assert audio.shape == folder_output[1].shape
    # our package stores the codec's weight-norm pairs and folds them as the folder load does
    # (bit-identical); audio.cpp's layout fuses them in numpy float32 (g * v / ||v||, another
    # rounding than torch._weight_norm), ulps that the random tiny codec amplifies to ~1e-4
    if layout == "f32":
        assert np.array_equal(audio, folder_output[1])
    else:
        assert np.abs(audio - folder_output[1]).max() <= 1e-3
        assert cosine(audio, folder_output[1]) >= 0.99999


@pytest.mark.parametrize("layout", ["f32", "audiocpp", "q8_0"])
def test_layouts_are_detected_without_family(layout: str, packages, tiny_dir) -> None:
    assert detect_family(packages[layout]).name == "audio8_tts"
    assert detect_family(tiny_dir).name == "audio8_tts"


def test_audiocpp_layout_holds_fused_codec_and_sidecars(packages) -> None:
    from audiocpp.engine.weights import open_weights

    src = open_weights(packages["audiocpp"])
    names = src.names()
    assert not [n for n in names if "parametrizations" in n or n.endswith(("weight_g", "weight_v"))]
    assert "codec_weights/decoder.model.0.conv.weight" in names
    assert {"config.json", "tokenizer.json", "tokenizer_config.json"} <= set(src.files)


def test_auto_keeps_q8_0_stored_even_with_bfloat16_units(packages, monkeypatch: pytest.MonkeyPatch) -> None:
    """Audio8's Q8_0 path is faster in float32-stored than in bfloat16 on AVX-512 + AMX too
    (docs/performance.md): ``auto`` picks it on every CPU; a BF16 package still computes in bfloat16."""
    from audiocpp.engine.nn.kernels import cpu_isa

    monkeypatch.setattr(cpu_isa, "native_bf16", lambda: True)
    assert plugin.cpu_bf16_for_quantized is False
    assert plugin.load(packages["q8_0"]).parts.compute.name == "float32-stored"
    assert plugin.load(packages["bf16"]).parts.compute.name == "bfloat16"


@pytest.mark.parametrize("wtype,max_code_mismatch,min_cos", [("q8_0", 0.5, 0.5), ("bf16", 0.5, 0.5)])
def test_reduced_precision_packages_drift_within_bounds(wtype: str, max_code_mismatch: float, min_cos: float,
                                                        packages, folder_output) -> None:
    """Drift figures (docs/families/audio8_tts.md): greedy codes from the same prompt."""
    from audiocpp.engine.weights import open_weights

    src = open_weights(packages[wtype])
    for table in ("embeddings.weight", "codebook_embeddings.weight", "fast_embeddings.weight"):
        assert src.info(f"model_weights/{table}").dtype in ("F16", "F32", "BF16")  # never block-quantized
    model = plugin.load(packages[wtype])
    ref_model = plugin.load(packages["f32"])
    ours = synth(model, do_sample=False)
    ref = synth(ref_model, do_sample=False)
    mismatch = float(np.mean(ours[0] != ref[0]))
    assert mismatch <= max_code_mismatch
    if ours[1].shape == ref[1].shape:
        assert cosine(ours[1], ref[1]) >= min_cos


@pytest.mark.parametrize("wrap", ["state_dict", "generator_prefix"])
def test_codec_checkpoint_wrappers(wrap: str, tiny_dir: Path, tmp_path: Path, folder_output) -> None:
    folder = tmp_path / "wrapped"
    shutil.copytree(tiny_dir, folder)
    state = torch.load(folder / "codec.pth", weights_only=True)
    if wrap == "state_dict":
        state = {"state_dict": state, "epoch": 3}
    else:  # training checkpoints: the generator's keys prefixed, a discriminator beside, RoPE buffers
        state = {**{f"generator.{k}": v for k, v in state.items()},
                 "discriminator.conv.weight": torch.ones(2),
                 "generator.quantizer.pre_module.freqs_cis": torch.ones(4, 2),
                 "generator.causal_mask": torch.ones(2, 2)}
    torch.save(state, folder / "codec.pth")
    codes, audio = synth(plugin.load(folder))
    assert np.array_equal(codes, folder_output[0]) and np.array_equal(audio, folder_output[1])


def test_codec_with_wrong_shapes_is_one_clear_error(tiny_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "badcodec"
    shutil.copytree(tiny_dir, folder)
    state = torch.load(folder / "codec.pth", weights_only=True)
    key = "quantizer.post_module.layers.0.attention.wqkv.weight"
    state[key] = torch.zeros(state[key].shape[0] + 8, state[key].shape[1])
    torch.save(state, folder / "codec.pth")
    with pytest.raises(ModelError, match=r"wrong shape: quantizer\.post_module\.layers\.0\.attention\.wqkv"):
        plugin.load(folder)


def test_config_and_missing_tensors_are_clear_errors(tiny_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "badcfg"
    shutil.copytree(tiny_dir, folder)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "n_layer": 3}))
    with pytest.raises(ModelError, match=r"missing from the weights: layers\.2\."):
        plugin.load(folder)
    (folder / "config.json").write_text(json.dumps({**cfg, "slow_backbone": "mamba3"}))
    with pytest.raises(ModelError, match="slow_backbone"):
        plugin.load(folder)
    (folder / "config.json").write_text(json.dumps(cfg))
    (folder / "tokenizer.json").unlink()
    with pytest.raises(ModelError, match="tokenizer.json"):
        plugin.load(folder)
