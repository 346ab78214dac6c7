"""resolve_weights against the real model specs, with folders and packages built here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from audiocpp.engine.errors import ModelError
from audiocpp.engine.spec import load_spec_file
from audiocpp.engine.spec.validate import builtin_spec_path
from audiocpp.engine.weights import resolve_weights
from tests.engine.weights_builders import write_gguf, write_package

OMNI_FILES = ["config.json", "tokenizer.json", "tokenizer_config.json", "audio_tokenizer/config.json",
              "audio_tokenizer/preprocessor_config.json"]
VOX_FILES = ["config.json", "tokenizer.json", "tokenizer_config.json"]


def spec(family: str):
    return load_spec_file(builtin_spec_path(family))


def _files(folder: Path, names: list[str]) -> None:
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(json.dumps({"name": name}))


def _st(path: Path, **tensors: torch.Tensor) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k.replace("__", "."): v for k, v in tensors.items()}, str(path))
    return path


def omnivoice_folder(root: Path) -> Path:
    _files(root, OMNI_FILES)
    _st(root / "model.safetensors", llm__embed__weight=torch.ones(4, 2))
    _st(root / "audio_tokenizer" / "model.safetensors", quantizer__codebook=torch.ones(3, 2))
    return root


def test_omnivoice_hf_folder(tmp_path: Path) -> None:
    folder = omnivoice_folder(tmp_path / "OmniVoice")
    r = resolve_weights(spec("omnivoice"), folder)
    assert r.source_id == "hf_folder" and r.format == "safetensors" and r.layout == "folder"
    assert r.path == folder and r.metadata == {} and r.model_spec_json is None
    assert r.namespaces["weights"].names() == ["llm.embed.weight"]
    assert r.namespace("audio_tokenizer_weights").names() == ["quantizer.codebook"]
    assert r.files["config"] == folder / "config.json" == r.file("config.json")
    assert (r.files["audio_tokenizer/preprocessor_config.json"]
            == folder / "audio_tokenizer/preprocessor_config.json")
    assert "chat_template" not in r.files
    (folder / "chat_template.jinja").write_text("{{ x }}")
    assert resolve_weights(spec("omnivoice"), folder).files["chat_template"] == folder / "chat_template.jinja"
    with pytest.raises(ModelError, match="no 'nope' weights"):
        r.namespace("nope")


def test_missing_required_file_or_weights_is_named(tmp_path: Path) -> None:
    folder = omnivoice_folder(tmp_path / "OmniVoice")
    (folder / "tokenizer_config.json").unlink()
    with pytest.raises(ModelError) as err:
        resolve_weights(spec("omnivoice"), folder)
    assert "file 'tokenizer_config.json' (tokenizer_config)" in str(err.value)
    assert "hf_folder" in str(err.value) and "hint:" in str(err.value)
    (folder / "tokenizer_config.json").write_text("{}")
    (folder / "audio_tokenizer" / "model.safetensors").unlink()
    with pytest.raises(ModelError,
                       match=r"weights file 'audio_tokenizer/model.safetensors' \(audio_tokenizer_weights\)"):
        resolve_weights(spec("omnivoice"), folder)


def test_sharded_root_checkpoint(tmp_path: Path) -> None:
    folder = omnivoice_folder(tmp_path / "m")
    (folder / "model.safetensors").unlink()
    _st(folder / "model-00001-of-00001.safetensors", a=torch.ones(1))
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"a": "model-00001-of-00001.safetensors"}}))
    r = resolve_weights(spec("omnivoice"), folder)
    assert r.namespaces["weights"].names() == ["a"]


def _omni_package(path: Path, drop: str | None = None) -> Path:
    files = {n: json.dumps({"name": n}).encode() for n in OMNI_FILES if n != drop}
    return write_package(path, {
        "weights/llm.embed.weight": np.ones((4, 32), np.float32),
        "weights/scale": np.array(1.5, np.float32),
        "audio_tokenizer_weights/conv.weight": np.ones((2, 3, 4), np.float32),
    }, files=files, spec={"family": "omnivoice"}, flatten={"audio_tokenizer_weights/conv.weight": (2, 12)},
        types={"weights/llm.embed.weight": "Q8_0"})


def test_omnivoice_package(tmp_path: Path) -> None:
    path = _omni_package(tmp_path / "omnivoice-q8_0.gguf")
    r = resolve_weights(spec("omnivoice"), path)
    assert r.source_id == "package" and r.layout == "package" and r.format == "gguf"
    assert r.family == "omnivoice" and json.loads(r.model_spec_json) == {"family": "omnivoice"}
    assert r.metadata["general.architecture"] == "audiocpp"
    weights = r.namespaces["weights"]
    assert (weights.names() == ["llm.embed.weight", "scale"]
            and weights.info("llm.embed.weight").dtype == "Q8_0")
    assert weights.info("scale").shape == ()
    assert r.namespaces["audio_tokenizer_weights"].get("conv.weight").shape == (2, 3, 4)
    assert r.files["config"].read_text() == json.dumps({"name": "config.json"})
    assert r.files["audio_tokenizer/config.json"] == r.files["audio_tokenizer/config.json"]
    # both the package and omnivoice.cpp layouts fit once a codec is given: the package wins
    codec = write_gguf(tmp_path / "codec.gguf", {"x": np.ones(2, np.float32)}, arch="omnivoice-tokenizer")
    assert resolve_weights(spec("omnivoice"), path, {"$codec": codec}).source_id == "package"


def test_package_missing_embedded_file(tmp_path: Path) -> None:
    path = _omni_package(tmp_path / "p.gguf", drop="tokenizer.json")
    with pytest.raises(ModelError, match=r"missing file 'tokenizer.json' \(tokenizer_json\)"):
        resolve_weights(spec("omnivoice"), path)


def test_package_inside_a_folder(tmp_path: Path) -> None:
    _omni_package(tmp_path / "model.gguf")
    assert resolve_weights(spec("omnivoice"), tmp_path).source_id == "package"


def test_omnivoice_cpp_needs_the_codec_root(tmp_path: Path) -> None:
    lm = write_gguf(tmp_path / "omnivoice-lm.gguf", {"blk.0.attn_q.weight": np.ones((2, 2), np.float32)},
                    arch="omnivoice-lm")
    with pytest.raises(ModelError) as err:
        resolve_weights(spec("omnivoice"), lm)
    assert "$codec" in str(err.value) and "--codec" in str(err.value)
    codec = write_gguf(tmp_path / "tok.gguf", {"enc.w": np.ones(3, np.float32)}, arch="omnivoice-tokenizer")
    r = resolve_weights(spec("omnivoice"), lm, {"codec": codec})
    assert r.source_id == "omnivoice_cpp" and r.layout == "gguf"
    assert r.namespaces["weights"].names() == ["blk.0.attn_q.weight"]
    assert r.namespaces["audio_tokenizer_weights"].names() == ["enc.w"]
    assert r.metadata["general.architecture"] == "omnivoice-lm"


def voxcpm_folder(root: Path, vae: str = "pth") -> Path:
    _files(root, VOX_FILES)
    _st(root / "model.safetensors", base_lm__embed=torch.ones(3, 2))
    vae_state = {"encoder.block.weight_g": torch.ones(2, 1, 1), "encoder.block.weight_v": torch.ones(2, 3, 1)}
    if vae == "pth":
        torch.save({"state_dict": vae_state, "epoch": 1}, root / "audiovae.pth")
    else:
        save_file(vae_state, str(root / "audiovae.safetensors"))
    return root


@pytest.mark.parametrize("vae", ["pth", "safetensors"])
def test_voxcpm2_folder(tmp_path: Path, vae: str) -> None:
    r = resolve_weights(spec("voxcpm2"), voxcpm_folder(tmp_path / "VoxCPM2", vae))
    assert r.source_id == "hf_folder"
    assert r.namespaces["audiovae_weights"].format == ("pytorch" if vae == "pth" else "safetensors")
    assert sorted(r.namespaces["audiovae_weights"].names()) == ["encoder.block.weight_g",
                                                                "encoder.block.weight_v"]
    assert "special_tokens_map" not in r.files


def test_voxcpm1_safetensors_preferred_then_pytorch(tmp_path: Path) -> None:
    folder = voxcpm_folder(tmp_path / "VoxCPM")
    torch.save({"base_lm.embed": torch.zeros(3, 2)}, folder / "pytorch_model.bin")
    assert resolve_weights(spec("voxcpm1"), folder).source_id == "hf_folder_safetensors"
    (folder / "model.safetensors").unlink()
    r = resolve_weights(spec("voxcpm1"), folder)
    assert r.source_id == "hf_folder_pytorch" and r.format == "pytorch"
    assert torch.equal(r.namespaces["weights"].get("base_lm.embed"), torch.zeros(3, 2))


def test_voxcpm_cpp_gguf_splits_by_prefix(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "voxcpm-0.5b.gguf", {
        "blk.0.attn_q.weight": np.ones((2, 2), np.float32),
        "token_embd.weight": np.ones((3, 2), np.float32),
        "audio_vae.encoder.block.0.weight": np.ones((2, 2), np.float32),
        "audio_vae.decoder.bias": np.ones(2, np.float32),
    }, arch="llama", metadata={"voxcpm_architecture": "voxcpm"})
    r = resolve_weights(spec("voxcpm1"), path)
    assert r.source_id == "voxcpm_cpp"
    assert sorted(r.namespaces["weights"].names()) == ["blk.0.attn_q.weight", "token_embd.weight"]
    assert sorted(r.namespaces["audiovae_weights"].names()) == ["decoder.bias", "encoder.block.0.weight"]
    assert r.namespaces["audiovae_weights"].info("decoder.bias").shape == (2,)


def test_voxcpm1_package_is_not_mistaken_for_voxcpm_cpp(tmp_path: Path) -> None:
    path = write_package(tmp_path / "v.gguf", {"weights/a": np.ones(2, np.float32),
                                                "audiovae_weights/b": np.ones(2, np.float32)},
                         files={n: b"{}" for n in VOX_FILES}, spec={"family": "voxcpm1"})
    r = resolve_weights(spec("voxcpm1"), path)
    assert r.source_id == "package" and r.namespaces["audiovae_weights"].names() == ["b"]


def test_path_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        resolve_weights(spec("omnivoice"), tmp_path / "nope")
    single = _st(tmp_path / "x.safetensors", a=torch.ones(1))
    with pytest.raises(ModelError, match="neither a GGUF file nor a model folder"):
        resolve_weights(spec("omnivoice"), single)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelError, match="complete OmniVoice model"):
        resolve_weights(spec("omnivoice"), empty)
    plain = write_gguf(tmp_path / "other.gguf", {"a": np.ones(2, np.float32)}, arch="llama")
    with pytest.raises(ModelError):
        resolve_weights(spec("voxcpm2"), plain)


def test_packages_written_by_the_packager_resolve(tmp_path: Path) -> None:
    """Interop: engine.packaging writes what this reader reads (q8_0, flattened convs, files, spec)."""
    from audiocpp.engine.packaging import plan_from_spec
    from audiocpp.engine.packaging import write_package as package

    folder = omnivoice_folder(tmp_path / "OmniVoice")
    g = torch.Generator().manual_seed(0)
    llm = {"llm.layers.0.mlp.up_proj.weight": torch.randn(64, 32, generator=g),
           "llm.norm.weight": torch.randn(32, generator=g)}
    codec = {"acoustic.conv.weight": torch.randn(8, 4, 3, generator=g), "acoustic.scale": torch.tensor(0.5)}
    save_file(llm, str(folder / "model.safetensors"))
    save_file(codec, str(folder / "audio_tokenizer" / "model.safetensors"))
    out = tmp_path / "omnivoice-q8_0.gguf"
    package(plan_from_spec(spec("omnivoice"), {"": folder}), out, "q8_0")
    r = resolve_weights(spec("omnivoice"), out)
    assert r.source_id == "package" and r.family == "omnivoice"
    for ns, state in (("weights", llm), ("audio_tokenizer_weights", codec)):
        src = r.namespaces[ns]
        assert sorted(src.names()) == sorted(state)
        for name, tensor in state.items():
            got = src.get(name, torch.float32)
            assert got.shape == tensor.shape, name
            torch.testing.assert_close(got, tensor, atol=0.05, rtol=0.05)
    for name in OMNI_FILES:
        assert r.files[name].read_bytes() == (folder / name).read_bytes()
