"""Every layout of a VoxCPM1 model loads to the same model, for both variants: the HF folder
(pytorch_model.bin or model.safetensors + audiovae.pth), our package GGUF (F32; BF16/F16/Q8_0 with
the VAE kept F32) and the VoxCPM.cpp GGUF layout (written by tools/voxcpm1/convert_voxcpm_cpp.py:
``voxcpm_*`` config keys, ``tokenizer.ggml.*``, ``blk.N.*`` names, folded VAE, 3-D and 2-D conv
storage, F32/F16/Q8_0). Also the config and tokenizer rebuilt from GGUF metadata, detection, and
the strict-loading errors."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from audiocpp.engine import registry
from audiocpp.engine.errors import ModelError
from audiocpp.engine.packaging.cli import package_from_cli
from audiocpp.engine.weights import open_weights
from audiocpp.families.voxcpm1 import plugin
from audiocpp.families.voxcpm2.config import VoxCPMConfig

from .cases import CASE_BY_NAME, TOKENIZER_TEXTS, cosine, run_ours

VARIANTS = ["tiny_05b", "tiny_15"]


def synth(model, ck: str, audio_files, kind: str = "clone",
          patches: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Latents and audio of a clone (exercises the VAE encoder too) or tts case; ``patches``: that
    many exactly, whatever the stop head says (drift tests: a random tiny model's stop decision
    sits near its threshold, and any reduced precision may move it a patch or two)."""
    case = CASE_BY_NAME[f"{ck}:{kind}"]
    if patches is not None:
        case = replace(case, options={**case.options, "min_tokens": patches, "max_tokens": patches})
    result, _ = run_ours(model, case, audio_files)
    return result.details["latents"][0], result.audio.samples


@pytest.fixture(scope="module")
def packages(checkpoints: dict[str, Path],
             tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    root = tmp_path_factory.mktemp("voxcpm1-packages")
    out = {}
    for ck in VARIANTS:
        for kind in ("f32", "q8_0"):
            out[ck, kind] = root / f"{ck}-{kind}.gguf"
            package_from_cli(out=out[ck, kind], inputs=[str(checkpoints[ck])], spec=None, family="voxcpm1",
                             weight_type=kind, keep_types=[], overwrite=False)
    return out


def test_package_layout(packages) -> None:
    source = open_weights(packages["tiny_05b", "q8_0"])
    assert set(source.namespaces()) == {"weights", "audiovae_weights"}
    dtypes = {name: source.info(name).dtype for name in source.names()}
    assert {d for n, d in dtypes.items() if n.startswith("audiovae_weights/")} == {"F32"}
    assert "audiovae_weights/decoder.model.0.weight_g" in dtypes, "weight-norm pairs are stored unfolded"
    assert dtypes["weights/base_lm.layers.0.mlp.up_proj.weight"] == "Q8_0"
    assert {"config.json", "tokenizer.json"} <= set(source.files)


def test_voxcpm_cpp_layout(cpp_gguf) -> None:
    """Our converter writes VoxCPM.cpp's layout (docs/families/voxcpm1.md, "The VoxCPM.cpp GGUF layout")."""
    source = open_weights(cpp_gguf("tiny_15"))
    meta = source.metadata
    assert source.format == "gguf" and meta["general.architecture"] == "llama"
    assert meta["voxcpm_architecture"] == "voxcpm" and meta["voxcpm_patch_size"] == 4
    assert list(meta["voxcpm_audio_vae_config_encoder_rates"]) == [2, 3, 6, 7, 7]
    assert meta["voxcpm_lm_config_use_mup"] == 1 and meta["llama.embedding_length"] == 64
    assert meta["tokenizer.ggml.model"] == "gpt2" and meta["tokenizer.ggml.pre"] == "default"
    assert len(meta["tokenizer.ggml.tokens"]) == meta["voxcpm_lm_config_vocab_size"]
    names = set(source.names())
    for name in ("token_embd.weight", "output_norm.weight", "blk.1.attn_output.weight",
                 "residual_lm.blk.2.ffn_down.weight", "locenc.special_token",
                 "locdit.time_mlp.linear_1.weight", "fsq.in_proj.weight", "proj.enc_to_lm.weight",
                 "stop.stop_head.weight", "audio_vae.decoder.model.0.weight"):
        assert name in names, name
    assert not any(n.endswith(("weight_g", "weight_v")) for n in names), "the VAE is stored folded"
    assert source.info("audio_vae.encoder.block.0.weight").shape == (4, 1, 7)
    assert source.info("audio_vae.decoder.model.2.block.0.alpha").shape == (64, 1)
    flat = open_weights(cpp_gguf("tiny_15", weight_type="q8_0", vae_type="q8_0"))
    fc_mu = flat.info("audio_vae.encoder.fc_mu.weight")  # (16, 128, 3) stored (out, in*k) in Q8_0
    assert (fc_mu.shape, fc_mu.dtype) == ((16, 384), "Q8_0")
    assert flat.info("audio_vae.decoder.model.1.weight").shape == (64, 16)  # 2-D, rows too short for Q8_0
    assert flat.info("audio_vae.decoder.model.0.weight").dtype == "F16"  # depthwise stays F16
    assert flat.info("blk.0.attn_q.weight").dtype == "Q8_0" and flat.info("output_norm.weight").dtype == "F32"


@pytest.mark.parametrize("ck", VARIANTS)
def test_layouts_load_to_identical_outputs(ck: str, checkpoints, packages, cpp_gguf, loaded,
                                           audio_files) -> None:
    latents, audio = synth(loaded(ck), ck, audio_files)
    others = {"package f32": packages[ck, "f32"], "voxcpm.cpp f32": cpp_gguf(ck),
              "voxcpm.cpp f32, 2-D convs": cpp_gguf(ck, conv_layout="2d")}
    for label, path in others.items():
        model = loaded(path)
        assert model.parts.source_id == ("package" if "package" in label else "voxcpm_cpp")
        other_latents, other_audio = synth(model, ck, audio_files)
        assert np.array_equal(other_latents, latents), label
        assert np.array_equal(other_audio, audio), label


@pytest.mark.parametrize("ck", VARIANTS)
def test_folded_vae_weights_load_bit_exactly(ck: str, loaded, cpp_gguf) -> None:
    """VoxCPM.cpp's folded convs load into the same plain convolutions our folder path folds
    into: every VAE tensor equal, so the VAE computes identically (no synthesized tensors)."""
    ours = loaded(ck).parts.codec.state_dict()
    for path in (cpp_gguf(ck), cpp_gguf(ck, conv_layout="2d")):
        cpp = loaded(path).parts.codec.state_dict()
        assert ours.keys() == cpp.keys()
        for name, tensor in ours.items():
            assert torch.equal(tensor, cpp[name]), name


def test_voxcpm_cpp_fold_formula_is_within_rounding(loaded, cpp_gguf, audio_files) -> None:
    """VoxCPM.cpp folds as ``g * v / (||v|| + 1e-12)``, not as torch's hook does: float32
    rounding differences only."""
    ck = "tiny_15"
    latents, audio = synth(loaded(ck), ck, audio_files)
    other_latents, other_audio = synth(loaded(cpp_gguf(ck, fold_with="voxcpm_cpp")), ck, audio_files)
    assert np.abs(other_latents - latents).max() <= 1e-5
    assert cosine(other_audio, audio) >= 0.99999


@pytest.mark.parametrize("ck", VARIANTS)
def test_config_from_gguf_metadata_equals_config_json(ck: str, loaded, cpp_gguf) -> None:
    folder, cpp = loaded(ck).config, loaded(cpp_gguf(ck)).config
    assert isinstance(cpp, VoxCPMConfig) and cpp == folder


def test_tokenizer_from_gguf_gives_the_same_ids(loaded, cpp_gguf) -> None:
    folder, cpp = loaded("tiny_05b").parts.tokenizer, loaded(cpp_gguf("tiny_05b")).parts.tokenizer
    for text in TOKENIZER_TEXTS:
        assert cpp(text) == folder(text), text


REDUCED = [("package", "q8_0"), ("voxcpm.cpp", "q8_0"), ("voxcpm.cpp", "q8_0+vae_q8_0"),
           ("voxcpm.cpp", "f16")]


@pytest.mark.parametrize("ck", VARIANTS)
@pytest.mark.parametrize("where,kind", REDUCED, ids=[f"{w}-{k}" for w, k in REDUCED])
def test_reduced_precision_drifts_little(ck: str, where: str, kind: str, packages, cpp_gguf, loaded,
                                         audio_files) -> None:
    if where == "package":
        path = packages[ck, kind]
    elif kind == "q8_0+vae_q8_0":
        path = cpp_gguf(ck, weight_type="q8_0", vae_type="q8_0")
    else:
        path = cpp_gguf(ck, weight_type=kind)
    latents, audio = synth(loaded(ck), ck, audio_files, "tts_seed7_steps5", patches=6)
    other_latents, other_audio = synth(loaded(path), ck, audio_files, "tts_seed7_steps5", patches=6)
    assert other_latents.shape == latents.shape
    assert 0 < np.abs(other_latents - latents).max() < 0.1
    assert cosine(other_audio, audio) > 0.999


def test_bfloat16_compute_drifts_little(loaded, audio_files) -> None:
    case = CASE_BY_NAME["tiny_05b:tts_seed7_steps5"]
    model = loaded("tiny_05b")
    ref, _ = run_ours(model, case, audio_files)
    bf = model.session("tts", compute_dtype="bfloat16").run(case.request(audio_files))
    a, b = ref.details["latents"][0], bf.details["latents"][0]
    assert a.shape == b.shape and 0 < np.abs(a - b).max() < 0.2
    assert cosine(ref.audio.samples, bf.audio.samples) > 0.999


def test_detection(checkpoints, cpp_gguf, packages, tmp_path: Path) -> None:
    assert registry.detect_family(cpp_gguf("tiny_05b")).name == "voxcpm1"
    assert registry.detect_family(packages["tiny_05b", "f32"]).name == "voxcpm1"
    assert registry.detect_family(checkpoints["tiny_15"]).name == "voxcpm1"
    # upstream's default: a VoxCPM config.json without "architecture" is VoxCPM1
    folder = tmp_path / "noarch"
    shutil.copytree(checkpoints["tiny_05b"], folder)
    config = json.loads((folder / "config.json").read_text())
    del config["architecture"]
    (folder / "config.json").write_text(json.dumps(config))
    assert registry.detect_family(folder).name == "voxcpm1"
    assert plugin.load(folder).config.architecture == "voxcpm"


def test_voxcpm2_checkpoint_is_refused(checkpoints, tmp_path: Path) -> None:
    other = tmp_path / "v2"
    shutil.copytree(checkpoints["tiny_15"], other)
    config = json.loads((other / "config.json").read_text())
    config["architecture"] = "voxcpm2"
    (other / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelError, match="--family voxcpm2"):
        plugin.load(other)


def test_missing_tensor_in_a_voxcpm_cpp_gguf_is_named(checkpoints, tmp_path: Path) -> None:
    from tools.voxcpm1.convert_voxcpm_cpp import convert

    broken = tmp_path / "broken"
    shutil.copytree(checkpoints["tiny_05b"], broken)
    state = torch.load(broken / "pytorch_model.bin", weights_only=True)["state_dict"]
    del state["residual_lm.layers.1.mlp.up_proj.weight"]
    torch.save({"state_dict": state}, broken / "pytorch_model.bin")
    with pytest.raises(ModelError, match=r"residual_lm\.layers\.1\.mlp\.up_proj\.weight"):
        plugin.load(broken)
    path = convert(broken, tmp_path / "broken.gguf")
    with pytest.raises(ModelError, match=r"residual_lm\.layers\.1\.mlp\.up_proj\.weight"):
        plugin.load(path)


def test_pytorch_bin_and_safetensors_folders_load_the_same(checkpoints, loaded, tmp_path: Path,
                                                            audio_files) -> None:
    """The 0.5B layout (pytorch_model.bin) and the 1.5 layout (model.safetensors) of the same weights."""
    from safetensors.torch import save_file

    folder = tmp_path / "st"
    shutil.copytree(checkpoints["tiny_05b"], folder)
    state = torch.load(folder / "pytorch_model.bin", weights_only=True)["state_dict"]
    save_file(state, str(folder / "model.safetensors"))
    (folder / "pytorch_model.bin").unlink()
    model = plugin.load(folder)
    assert model.parts.source_id == "hf_folder_safetensors"
    assert loaded("tiny_05b").parts.source_id == "hf_folder_pytorch"
    a, b = synth(loaded("tiny_05b"), "tiny_05b", audio_files), synth(model, "tiny_05b", audio_files)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_the_wrong_family_chosen_for_a_voxcpm_cpp_gguf_names_the_right_one(cpp_gguf) -> None:
    """`--family voxcpm2` on a VoxCPM.cpp GGUF: the load error says whose files they are."""
    import audiocpp.engine as ac

    path = cpp_gguf("tiny_15")
    with pytest.raises(ModelError) as info:
        ac.load(path, family="voxcpm2")
    assert "looks like a voxcpm1 model" in (info.value.hint or "")
    assert "family='voxcpm1'" in (info.value.hint or "")  # the Python API's wording
    assert ac.load(path).family == "voxcpm1"
