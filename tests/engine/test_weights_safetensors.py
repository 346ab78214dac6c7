"""safetensors sources: single files, sharded indexes, dtypes, zero-copy and lying headers."""

from __future__ import annotations

import json
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from audiocpp.engine.errors import ModelError
from audiocpp.engine.weights import SafetensorsSource, ShardedSource, open_weights


def _state() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "a.weight": torch.randn(4, 6, generator=g),
        "a.bias": torch.randn(4, generator=g).half(),
        "b.weight": torch.randn(2, 3, 5, generator=g).to(torch.bfloat16),
        "steps": torch.arange(7),
        "mask": torch.tensor([True, False]),
        "scalar": torch.tensor(3.5),
    }


def test_round_trip_keeps_dtypes_and_shapes(tmp_path: Path) -> None:
    state = _state()
    save_file(state, str(tmp_path / "m.safetensors"), metadata={"format": "pt"})
    src = open_weights(tmp_path / "m.safetensors")
    assert isinstance(src, SafetensorsSource) and src.format == "safetensors"
    assert sorted(src.names()) == sorted(state) and src.metadata == {"format": "pt"}
    for name, tensor in state.items():
        got = src.get(name)
        assert got.dtype == tensor.dtype and torch.equal(got, tensor), name
        assert src.info(name).shape == tuple(tensor.shape)
    assert src.info("b.weight").dtype == "BF16" and src.info("steps").dtype == "I64"
    assert src.info("scalar").shape == ()
    assert src.get("a.bias", torch.float32).dtype == torch.float32
    assert src.state_dict().keys() == state.keys()


def test_zero_copy_and_warning_free(tmp_path: Path) -> None:
    save_file({"w": torch.arange(12.0).reshape(3, 4)}, str(tmp_path / "z.safetensors"))
    src = open_weights(tmp_path / "z.safetensors")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a, b = src.get("w"), src.get("w")
    assert a.data_ptr() == b.data_ptr()
    a.zero_()  # private copy-on-write mapping: the file is unchanged
    assert torch.equal(open_weights(tmp_path / "z.safetensors").get("w"), torch.arange(12.0).reshape(3, 4))


def _raw_file(path: Path, header: dict, data: bytes) -> Path:
    blob = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + data)
    return path


def test_unaligned_offsets_are_read_correctly(tmp_path: Path) -> None:
    values = np.arange(3, dtype=np.float32)
    header = {"pad": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
              "x": {"dtype": "F32", "shape": [3], "data_offsets": [1, 13]}}
    src = open_weights(_raw_file(tmp_path / "u.safetensors", header, b"\x07" + values.tobytes()))
    assert torch.equal(src.get("x"), torch.from_numpy(values)) and src.get("pad").item() == 7


def test_gaps_between_tensors_are_refused_with_the_file_named(tmp_path: Path) -> None:
    """Our header checks pass; the safetensors library refuses a gap before the first tensor."""
    header = {"x": {"dtype": "F32", "shape": [3], "data_offsets": [4, 16]}}
    src = open_weights(_raw_file(tmp_path / "gap.safetensors", header,
                                 bytes(4) + np.arange(3, dtype=np.float32).tobytes()))
    with pytest.raises(ModelError) as err:
        src.get("x")
    assert "gap.safetensors is not a valid safetensors file" in str(err.value) and "offset" in str(err.value)


def test_sharded_index(tmp_path: Path) -> None:
    state = _state()
    names = list(state)
    save_file({n: state[n] for n in names[:3]}, str(tmp_path / "model-00001-of-00002.safetensors"))
    save_file({n: state[n] for n in names[3:]}, str(tmp_path / "model-00002-of-00002.safetensors"))
    index = {"metadata": {"total_size": 1}, "weight_map": {
        n: f"model-0000{1 if i < 3 else 2}-of-00002.safetensors" for i, n in enumerate(names)}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    src = open_weights(tmp_path / "model.safetensors.index.json")
    assert isinstance(src, ShardedSource) and src.format == "safetensors"
    assert src.names() == names
    for n in names:
        assert torch.equal(src.get(n), state[n])
    folder = open_weights(tmp_path)  # an HF folder with only the sharded checkpoint
    assert folder.format == "folder" and folder.names() == names


def test_sharded_index_errors(tmp_path: Path) -> None:
    save_file({"a": torch.ones(2)}, str(tmp_path / "s1.safetensors"))
    index = tmp_path / "x.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}}))
    with pytest.raises(ModelError, match="shard 's2.safetensors', which is missing"):
        open_weights(index)
    index.write_text(json.dumps({"weight_map": {"a": "s1.safetensors", "zz": "s1.safetensors"}}))
    with pytest.raises(ModelError, match="maps 'zz' to s1.safetensors, which does not hold it"):
        open_weights(index)
    index.write_text("{not json")
    with pytest.raises(ModelError, match="not a valid sharded-checkpoint index"):
        open_weights(index)


def _good(tmp_path: Path) -> tuple[bytes, dict, int]:
    save_file({"w": torch.ones(4, 4)}, str(tmp_path / "g.safetensors"))
    raw = (tmp_path / "g.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return raw, json.loads(raw[8 : 8 + n]), n


@pytest.mark.parametrize("case", ["offset_beyond_file", "size_mismatch", "header_too_long", "invalid_json",
                                  "tiny_file", "truncated_data", "bad_dtype", "malformed_entry"])
def test_lying_safetensors_headers(tmp_path: Path, case: str) -> None:
    raw, header, n = _good(tmp_path)
    data = raw[8 + n :]
    bad = tmp_path / "bad.safetensors"
    if case == "offset_beyond_file":
        header["w"]["data_offsets"] = [0, 64 + 4096]
        header["w"]["shape"] = [4, 4 + 1024]
        _raw_file(bad, header, data)
        needle = "spans bytes"
    elif case == "size_mismatch":
        header["w"]["shape"] = [4, 8]
        _raw_file(bad, header, data)
        needle = "needs 128 bytes but spans 64"
    elif case == "header_too_long":
        bad.write_bytes(struct.pack("<Q", 10**6) + raw[8:])
        needle = "header claims 1000000 bytes"
    elif case == "invalid_json":
        blob = b"{oops" + b" " * (n - 5)
        bad.write_bytes(raw[:8] + blob + data)
        needle = "not valid JSON"
    elif case == "tiny_file":
        bad.write_bytes(b"abc")
        needle = "only 3 bytes"
    elif case == "truncated_data":
        bad.write_bytes(raw[:-10])
        needle = "spans bytes 0..64 of a 54-byte data section"
    elif case == "bad_dtype":
        header["w"]["dtype"] = "F4"
        _raw_file(bad, header, data)
        needle = "dtype F4"
    else:
        header["w"] = {"dtype": "F32"}
        _raw_file(bad, header, data)
        needle = "malformed header entry"
    with pytest.raises(ModelError) as err:
        open_weights(bad)
    assert needle in str(err.value) and "bad.safetensors" in str(err.value)
