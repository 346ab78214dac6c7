"""Plain GGUF sources: every ggml type gguf-py can dequantize, shapes, zero-copy, errors."""

from __future__ import annotations

import warnings
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

from audiocpp.engine.errors import ModelError
from audiocpp.engine.weights import GGUFSource, open_weights
from tests.engine.weights_builders import write_gguf

QUANTIZABLE = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "TQ1_0", "TQ2_0"]


def _dequantizable() -> list[str]:
    from gguf import quants

    return sorted(t.name for t in quants._type_traits if t.name != "BF16")


def _write_raw(path: Path, name: str, raw: np.ndarray, qtype: GGMLQuantizationType) -> Path:
    writer = gguf.GGUFWriter(str(path), "test")
    writer.add_tensor(name, raw, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_float_types_round_trip_exactly_and_keep_their_dtype(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 5, 8)).astype(np.float32)
    path = write_gguf(tmp_path / "f.gguf", {"f32": a, "f16": a.astype(np.float16),
                                            "f64": a.astype(np.float64), "bf16": a},
                      types={"bf16": "BF16"})
    src = open_weights(path)
    assert isinstance(src, GGUFSource) and src.format == "gguf"
    assert src.info("f32").shape == (3, 5, 8) and src.info("f32").dtype == "F32"
    assert torch.equal(src.get("f32"), torch.from_numpy(a))
    assert src.get("f16").dtype == torch.float16
    assert torch.equal(src.get("f16"), torch.from_numpy(a.astype(np.float16)))
    assert src.get("f64").dtype == torch.float64 and torch.equal(src.get("f64"), torch.from_numpy(a).double())
    assert src.info("bf16").dtype == "BF16" and src.get("bf16").dtype == torch.bfloat16
    assert torch.equal(src.get("bf16"), torch.from_numpy(a).to(torch.bfloat16))  # gguf-py rounds like torch
    assert src.get("f16", torch.float32).dtype == torch.float32
    assert torch.equal(src.get("bf16", torch.float32), torch.from_numpy(a).to(torch.bfloat16).float())


@pytest.mark.parametrize("kind", ["I8", "I16", "I32", "I64"])
def test_integer_types(tmp_path: Path, kind: str) -> None:
    values = (np.arange(24) - 12).reshape(2, 3, 4).astype(f"int{kind[1:]}")
    src = open_weights(write_gguf(tmp_path / "i.gguf", {"t": values}))
    assert src.info("t") .dtype == kind and src.info("t").shape == (2, 3, 4)
    got = src.get("t")
    assert got.dtype == getattr(torch, f"int{kind[1:]}")
    assert torch.equal(got, torch.from_numpy(values))


def test_f32_and_f16_are_zero_copy_and_warning_free(tmp_path: Path) -> None:
    a = np.arange(64, dtype=np.float32).reshape(4, 16)
    src = open_weights(write_gguf(tmp_path / "z.gguf", {"a": a, "h": a.astype(np.float16)}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x, y = src.get("a"), src.get("a")
        h1, h2 = src.get("h"), src.get("h")
    assert x.data_ptr() == y.data_ptr() and h1.data_ptr() == h2.data_ptr()  # views of the one mapping
    x.mul_(0)  # copy-on-write: the file itself is untouched
    assert torch.equal(open_weights(tmp_path / "z.gguf").get("a"), torch.from_numpy(a))


@pytest.mark.parametrize("kind", QUANTIZABLE)
def test_quantized_round_trip_matches_gguf_dequantize(tmp_path: Path, kind: str) -> None:
    qtype = GGMLQuantizationType[kind]
    block = GGML_QUANT_SIZES[qtype][0]
    a = np.random.default_rng(1).standard_normal((2, 3, 2 * block)).astype(np.float32)
    raw = gguf.quants.quantize(a, qtype)
    src = open_weights(_write_raw(tmp_path / "q.gguf", "w", raw, qtype))
    assert src.info("w").dtype == kind and src.info("w").shape == a.shape
    got = src.get("w")
    assert got.dtype == torch.float32 and got.shape == a.shape
    np.testing.assert_array_equal(got.numpy(), gguf.quants.dequantize(raw, qtype))
    assert float(np.abs(got.numpy() - a).max()) < 2.0  # really the same tensor, within quantization error
    assert src.get("w", torch.float16).dtype == torch.float16


@pytest.mark.parametrize("kind", _dequantizable())
def test_every_dequantizable_type_matches_gguf_on_random_blocks(tmp_path: Path, kind: str) -> None:
    """K-quants, IQ and the rest: random block bytes (bit 6 clear, so every f16 scale is finite)."""
    qtype = GGMLQuantizationType[kind]
    block, type_size = GGML_QUANT_SIZES[qtype]
    rows, blocks_per_row = 3, 2
    raw = (np.random.default_rng(2).integers(0, 256, (rows, blocks_per_row * type_size))
           & 0xBF).astype(np.uint8)
    src = open_weights(_write_raw(tmp_path / "k.gguf", "w", raw, qtype))
    assert src.info("w").shape == (rows, blocks_per_row * block)
    got = src.get("w")
    expected = gguf.quants.dequantize(raw, qtype)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got.numpy(), expected)


def test_dims_are_reversed_to_pytorch_order(tmp_path: Path) -> None:
    a = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    src = open_weights(write_gguf(tmp_path / "d.gguf", {"a": a}))
    assert src.gguf.tensors["a"].ne == (5, 4, 3, 2)
    assert src.info("a").shape == (2, 3, 4, 5)
    assert torch.equal(src.get("a"), torch.from_numpy(a))


def test_metadata_and_namespaces_of_a_plain_gguf(tmp_path: Path) -> None:
    src = open_weights(write_gguf(tmp_path / "m.gguf", {"audio_vae.x": np.ones(2, np.float32),
                                                         "blk.0.w": np.ones(2, np.float32)},
                                  arch="llama", metadata={"voxcpm_architecture": "voxcpm"}))
    assert src.metadata["general.architecture"] == "llama"
    assert src.metadata["voxcpm_architecture"] == "voxcpm"
    assert src.files == {} and src.namespaces() == []
    vae = src.namespace("audio_vae", sep=".")
    assert vae.names() == ["x"] and torch.equal(vae.get("x"), torch.ones(2))
    with pytest.raises(ModelError, match="no tensor 'nope'"):
        src.get("nope")


def _good(tmp_path: Path) -> bytes:
    return write_gguf(tmp_path / "good.gguf", {"w": np.ones((8, 8), np.float32)}).read_bytes()


def test_truncated_gguf_is_a_clear_error(tmp_path: Path) -> None:
    raw = _good(tmp_path)
    for cut in (len(raw) - 100, 40, 10):
        bad = tmp_path / f"cut{cut}.gguf"
        bad.write_bytes(raw[:cut])
        with pytest.raises(ModelError) as err:
            open_weights(bad)
        text = str(err.value)
        assert ("truncated" in text or "only" in text) and "Traceback" not in text


def test_wrong_magic_and_version(tmp_path: Path) -> None:
    raw = _good(tmp_path)
    bad = tmp_path / "magic.gguf"
    bad.write_bytes(b"GGUX" + raw[4:])
    with pytest.raises(ModelError, match="not a GGUF file"):
        open_weights(bad)
    old = tmp_path / "v9.gguf"
    old.write_bytes(raw[:4] + (9).to_bytes(4, "little") + raw[8:])
    with pytest.raises(ModelError, match="version 9"):
        open_weights(old)


def test_unknown_ggml_type_is_named(tmp_path: Path) -> None:
    raw = bytearray(_good(tmp_path))
    # the tensor directory entry: name "w", n_dims 2, ne 8 8, then the type (u32)
    at = raw.index(b"\x01\x00\x00\x00\x00\x00\x00\x00w") + 9 + 4 + 16
    raw[at : at + 4] = (77).to_bytes(4, "little")
    bad = tmp_path / "type.gguf"
    bad.write_bytes(bytes(raw))
    with pytest.raises(ModelError, match="unknown ggml type 77"):
        open_weights(bad)
