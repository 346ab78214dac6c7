"""What the C++ ports' real converters write, reproduced with our own writers (issue #18).

Running omnivoice.cpp's, VoxCPM.cpp's and audio.cpp's converters on tiny checkpoints
(tools/converters/run_matrix.py, docs/gguf-format.md) showed two layouts our writers did not make:

- VoxCPM.cpp copies tokenizer.json's merges through verbatim; ``tokenizers`` >= 0.20 saves them as
  ``["a", "b"]`` pairs, so the GGUF holds an array of string arrays.
- ggml's GGUF writer (omnivoice.cpp's ``quantize``, VoxCPM.cpp's ``voxcpm_quantize``) stores a
  tensor with ``ggml_n_dims`` dimensions: trailing unit ``ne`` (leading unit PyTorch dims) are
  dropped, so a Snake alpha ``(1, C, 1)`` comes back ``(C, 1)`` and a ``(1, C, 7)`` conv ``(C, 7)``.

``ggml_rewrite`` copies a GGUF the way those tools re-write it (every key with its type, every
tensor's bytes unchanged, dims as ggml counts them), with optional key overrides.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest

from audiocpp.engine.weights.gguf_file import GGUFFile
from tests.support import cli_ok, read_wav, run_cli, unfold_hubert_pos_conv

SHORT = ["--request-option", "max_tokens=6", "--request-option", "retry_badcase=false"]


def _tool(name: str):
    """A maintainer tool module, ``tools.<family>.<module>`` (the repository root is on the path)."""
    return importlib.import_module(f"tools.{name}")


def ggml_dims(ne: tuple[int, ...]) -> tuple[int, ...]:
    """``ne`` as ``ggml_n_dims`` counts it: trailing ones dropped, at least one dim kept."""
    n = len(ne)
    while n > 1 and ne[n - 1] == 1:
        n -= 1
    return tuple(ne[:n])


def ggml_rewrite(src: Path, dst: Path, overrides: dict[str, Any] | None = None) -> Path:
    """Copy ``src`` to ``dst`` as a ggml-based tool writes it (see the module docstring)."""
    overrides = dict(overrides or {})
    reader = gguf.GGUFReader(str(src))  # the value types (gguf-py misreads nested arrays: values from ours)
    values = GGUFFile(src).metadata
    writer = gguf.GGUFWriter(str(dst), values["general.architecture"])
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        vtype = field.types[0]
        sub = field.types[1] if vtype == gguf.GGUFValueType.ARRAY and key not in overrides else None
        value = overrides.pop(key, values[key])
        writer.add_key_value(key, value.tolist() if isinstance(value, np.ndarray) else value, vtype,
                             sub_type=sub)
    assert not overrides, f"keys not in {src.name}: {sorted(overrides)}"
    for t in reader.tensors:
        ne = ggml_dims(tuple(int(d) for d in t.shape))
        writer.add_tensor(t.name, np.ascontiguousarray(t.data), raw_shape=tuple(reversed(ne)),
                          raw_dtype=t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dst


def test_ggml_rewrite_drops_trailing_unit_dims(tmp_path: Path) -> None:
    src = tmp_path / "src.gguf"
    writer = gguf.GGUFWriter(str(src), "quirk")
    writer.add_array("quirk.pairs", [["a", "b"], ["c", "d"]])
    writer.add_tensor("alpha", np.arange(4, dtype=np.float32).reshape(1, 4, 1))
    writer.add_tensor("conv", np.ones((1, 2, 7), dtype=np.float32))
    writer.add_tensor("plain", np.ones((3, 32), dtype=np.float32))
    for step in (writer.write_header_to_file, writer.write_kv_data_to_file, writer.write_tensors_to_file,
                 writer.close):
        step()
    out = GGUFFile(ggml_rewrite(src, tmp_path / "out.gguf"))
    assert {n: t.torch_shape for n, t in out.tensors.items()} == {"alpha": (4, 1), "conv": (2, 7),
                                                                  "plain": (3, 32)}
    assert out.metadata["quirk.pairs"] == [["a", "b"], ["c", "d"]]
    assert np.array_equal(out.raw("alpha").view(np.float32), np.arange(4, dtype=np.float32))


# -- VoxCPM.cpp: merges copied through as pairs ------------------------------------------------
@pytest.fixture(scope="module")
def voxcpm1_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ck = _tool("voxcpm1.checkpoint")
    return ck.write_v1_checkpoint(tmp_path_factory.mktemp("quirk-v1") / "tiny_05b", ck.TINY_05B, seed=99,
                                  weights="bin", stop_tie=0.01)


def test_voxcpm_cpp_gguf_with_pair_merges_loads(voxcpm1_folder: Path, tmp_path: Path) -> None:
    """The file VoxCPM.cpp's converter writes from a tokenizer.json that tokenizers >= 0.20 saved:
    the CLI loads it and speaks as the folder does (before the fix: 'tokenizer.ggml.merges is not a
    string array')."""
    import json

    merges = json.loads((voxcpm1_folder / "tokenizer.json").read_text(encoding="utf-8"))["model"]["merges"]
    assert isinstance(merges[0], list)  # the form tokenizers >= 0.20 saves
    strings = _tool("voxcpm1.convert_voxcpm_cpp").convert(voxcpm1_folder, tmp_path / "strings.gguf")
    pairs = ggml_rewrite(strings, tmp_path / "pairs.gguf", {"tokenizer.ggml.merges": merges})
    assert GGUFFile(pairs).metadata["tokenizer.ggml.merges"][0] == merges[0]
    audio = {}
    for name, model in (("folder", voxcpm1_folder), ("pairs", pairs)):
        out = tmp_path / f"{name}.wav"
        cli_ok("--model", model, "--text", "Hello world.", "--seed", "42", *SHORT, "--out", out,
               "--format", "wav32")
        audio[name] = read_wav(out)[0]
    assert audio["folder"].shape == audio["pairs"].shape
    assert float(np.abs(audio["folder"] - audio["pairs"]).max()) < 1e-5


def test_voxcpm_cpp_gguf_of_voxcpm2_is_refused_clearly(voxcpm1_folder: Path, tmp_path: Path) -> None:
    """VoxCPM.cpp's converter writes VoxCPM2 checkpoints in the same layout (voxcpm_architecture
    "voxcpm2"); audiocpp does not read that layout and says so, exit 1, no traceback, no file."""
    strings = _tool("voxcpm1.convert_voxcpm_cpp").convert(voxcpm1_folder, tmp_path / "v1.gguf")
    v2 = ggml_rewrite(strings, tmp_path / "v2.gguf", {"voxcpm_architecture": "voxcpm2"})
    out = tmp_path / "x.wav"
    proc = run_cli("--model", v2, "--text", "Hello.", "--out", out)
    assert proc.returncode == 1, proc.stderr
    assert "VoxCPM.cpp GGUF of a 'voxcpm2' model" in proc.stderr and "audiocpp package" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()


# -- ggml re-writers: leading unit dims dropped ------------------------------------------------
@pytest.fixture(scope="module")
def omnivoice_cpp_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from audiocpp.families.omnivoice.demo import write_demo

    root = tmp_path_factory.mktemp("quirk-ov")
    folder = root / "OmniVoice"
    write_demo(folder)
    unfold_hubert_pos_conv(folder / "audio_tokenizer" / "model.safetensors")
    cpp = root / "cpp"
    cpp.mkdir()
    writer = _tool("omnivoice.convert_omnivoice_cpp")
    lm = writer.write_lm(folder, cpp, "f32")
    codec = writer.write_codec(folder, cpp)
    squeezed = ggml_rewrite(codec, root / "omnivoice-tokenizer-Q8_0.gguf")
    return {"folder": folder, "lm": lm, "codec": codec, "squeezed": squeezed}


def test_omnivoice_codec_rewritten_by_ggml_loads(omnivoice_cpp_files: dict[str, Path],
                                                 tmp_path: Path) -> None:
    """omnivoice.cpp's ``quantize`` output keeps the codec's Snake alphas as (C, 1) and the last
    decoder conv as (C, 7): the codec loads and the audio is the folder's."""
    files = omnivoice_cpp_files
    shapes = {n: t.torch_shape for n, t in GGUFFile(files["squeezed"]).tensors.items()}
    assert shapes["acoustic_decoder.conv2.weight"][0] != 1
    assert all(len(s) == 2 for n, s in shapes.items() if n.endswith(".alpha"))
    audio = {}
    for name, extra in (("folder", ["--model", files["folder"]]),
                        ("squeezed", ["--model", files["lm"], "--codec", files["squeezed"]])):
        out = tmp_path / f"{name}.wav"
        cli_ok(*extra, "--text", "Hello.", "--seed", "3", "--request-option", "num_inference_steps=4",
               "--out", out, "--format", "wav32")
        audio[name] = read_wav(out)[0]
    assert audio["folder"].shape == audio["squeezed"].shape
    assert float(np.abs(audio["folder"] - audio["squeezed"]).max()) < 1e-5
