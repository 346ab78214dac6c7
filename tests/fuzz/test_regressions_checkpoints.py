"""What the fuzzers found in the safetensors and ``.pth`` readers, kept as exact inputs."""

from __future__ import annotations

import io
import json
import pickle
import struct
import zipfile
from pathlib import Path

import pytest

from audiocpp.engine.errors import ModelError
from audiocpp.engine.weights.torch_source import load_weights_only

from . import seeds
from .harness import check
from .test_fuzz_gguf import read_everything


def _safetensors(header: str, data: bytes = b"") -> bytes:
    raw = header.encode()
    return struct.pack("<Q", len(raw)) + raw + data


SAFETENSORS = {
    # a list as dtype: `[] in dict` is a TypeError
    "list dtype": (_safetensors('{"t": {"dtype": [], "shape": [], "data_offsets": [0, 8]}}', b"\1" * 8),
                   "dtype"),
    # 1e999 is infinity: int(inf) is an OverflowError
    "infinite dim": (_safetensors('{"t": {"dtype": "F32", "shape": [1e999], "data_offsets": [0, 0]}}'),
                     "integers"),
    "infinite offset": (_safetensors('{"t": {"dtype": "F32", "shape": [], "data_offsets": [1e999, 8]}}',
                                     b"\1" * 8),
                        "integers"),
    # 5000 digits: ValueError from int() (not a JSONDecodeError)
    "huge number": (_safetensors('{"t": {"dtype": "F32", "shape": [' + "9" * 5000
                                 + '], "data_offsets": [0, 8]}}'),
                    "not valid JSON"),
    # 20 000 open brackets: RecursionError
    "deep header": (_safetensors("[" * 20_000), "not valid JSON"),
    # a zero dimension and one of 2^80: 0 bytes, accepted, then torch's size overflowed
    "zero-dim overflow": (_safetensors('{"t": {"dtype": "F32", "shape": [0, 1208925819614629174706176], '
                                       '"data_offsets": [0, 0]}}'), "overflows"),
    # booleans are not dimensions
    "bool dim": (_safetensors('{"t": {"dtype": "F32", "shape": [true], "data_offsets": [0, 4]}}', b"\1" * 4),
                 "integers"),
}


@pytest.mark.parametrize("name", sorted(SAFETENSORS))
def test_safetensors_findings(tmp_path: Path, name: str) -> None:
    data, words = SAFETENSORS[name]
    path = tmp_path / "found.safetensors"
    path.write_bytes(data)
    with pytest.raises(ModelError, match=words):
        read_everything(path)


def test_sharded_index_findings(tmp_path: Path) -> None:
    (tmp_path / "ok.safetensors").write_bytes(seeds.safetensors_seeds()["one"])
    index = tmp_path / "model.safetensors.index.json"
    for body, words in (
        ({"weight_map": {"x": ["a"]}}, "not a file name"),  # a list as the shard: unhashable (TypeError)
        ({"weight_map": {"x": "../outside.safetensors"}}, "not a file name"),  # outside the folder
        ({"weight_map": {"x": "/etc/passwd"}}, "not a file name"),
        ({"weight_map": {"y": "ok.safetensors"}, "metadata": [1]}, "does not hold it"),
    ):
        index.write_text(json.dumps(body))
        with pytest.raises(ModelError, match=words):
            read_everything(index)
    index.write_text('{"weight_map": ' + "[" * 20_000)
    with pytest.raises(ModelError, match="not a valid sharded-checkpoint index"):
        read_everything(index)


def test_malformed_pickles_are_model_errors(tmp_path: Path) -> None:
    """The weights-only unpickler raises IndexError, TypeError... for malformed input."""
    path = tmp_path / "bad.pth"
    for payload in (pickle.PROTO + b"\x02" + pickle.POP + pickle.STOP,  # pop from an empty stack: IndexError
                    pickle.PROTO + b"\x02" + b"ctorch._utils\n_rebuild_tensor_v2\n" + pickle.EMPTY_TUPLE
                    + pickle.REDUCE + pickle.STOP):  # an allowed global with missing arguments: TypeError
        path.write_bytes(payload)
        with pytest.raises(ModelError):
            read_everything(path)


def test_a_legacy_string_length_is_not_an_allocation(tmp_path: Path) -> None:
    """A legacy checkpoint whose pickled string claims 2 GB: read(2**31) allocated 2 GB before
    reading the 600-byte file (MemoryError under the fuzz harness's memory cap)."""
    data = seeds.torch_seeds()["legacy"]
    at = data.index(b"X\n\x00\x00\x00state_dict")
    path = tmp_path / "long.pth"
    path.write_bytes(data[:at] + b"X\xff\xff\xff\x7f" + data[at + 5:])
    outcome = check("regression", lambda: read_everything(path), files=[path])
    assert isinstance(outcome, ModelError)


def test_a_legacy_file_with_a_zip_directory_inside_is_read_as_torch_reads_it(tmp_path: Path) -> None:
    """zipfile.is_zipfile finds a zip directory anywhere in a file, torch.load only trusts the first
    bytes: a legacy checkpoint with a zip after it went to torch's own legacy reader, past the capped
    one, and its 2 GB string length was allocated (MemoryError under the memory cap; the voice-prompt
    fuzzer's find)."""
    data = seeds.torch_seeds()["legacy"]
    at = data.index(b"X\n\x00\x00\x00state_dict")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("archive/data.pkl", b"\0")
    path = tmp_path / "both.pth"
    path.write_bytes(data[:at] + b"X\xff\xff\xff\x7f" + data[at + 5:] + buf.getvalue())
    assert zipfile.is_zipfile(path)
    outcome = check("regression", lambda: load_weights_only(path, mmap=False), files=[path])  # voice prompts'
    assert isinstance(outcome, ModelError)
    damaged = tmp_path / "damaged.pth"  # a zip's first bytes without its directory
    damaged.write_bytes(b"PK\x03\x04" + b"\0" * 64)
    with pytest.raises(ModelError, match="damaged"):
        load_weights_only(damaged, mmap=False)


def test_a_zip_bomb_checkpoint_is_refused_before_inflating(tmp_path: Path) -> None:
    path = tmp_path / "bomb.pth"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("archive/data.pkl", b"\0" * (64 << 20))  # 64 MiB of zeros: ~64 KiB deflated
    path.write_bytes(buf.getvalue())
    assert path.stat().st_size < 1 << 20
    with pytest.raises(ModelError, match="claim .* uncompressed"):
        read_everything(path)
