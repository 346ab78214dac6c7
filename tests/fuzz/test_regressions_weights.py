"""What the fuzzers found in the weights readers, kept as exact inputs: each was a traceback
(or an allocation sized by the file), and is now one clear ModelError or SpecError."""

from __future__ import annotations

from pathlib import Path

import pytest

from audiocpp.engine.errors import ModelError, SpecError
from audiocpp.engine.weights import open_weights

from . import gguf_raw as g
from .crafted import PACKAGE, gguf, info, kv, nested_arrays, numbers, string, strings
from .mutate import u32, u64
from .test_fuzz_gguf import detect, read_everything

CASES = {
    # general.alignment 0 divided by zero; a string or a float alignment was a TypeError
    "alignment zero": (gguf([kv("general.alignment", g.U32, u32(0))]), "not a power of two"),
    "alignment string": (gguf([string("general.alignment", "32")]), "not a power of two"),
    "alignment three": (gguf([kv("general.alignment", g.U32, u32(3))]), "not a power of two"),
    # arrays nested 10 000 deep exhausted the recursion (RecursionError)
    "nested arrays": (gguf([nested_arrays(10_000)]), "nested more than"),
    # 2^40 strings claimed by a 100-byte file: refused before a list is built
    "string count": (gguf([kv("x.s", g.ARRAY, u32(g.STRING) + u64(2**40))]), "claims 1099511627776 items"),
    # 2^40 tensors claimed
    "tensor count": (gguf([], n_tensors=2**40), "implausible counts"),
    # a zero dimension let the others be 2^62: torch's numel overflowed (RuntimeError)
    "zero-dim overflow": (gguf([], [info("t", [0, 2**62, 2**62])]), "overflows 64 bits"),
    "dim over int64": (gguf([], [info("t", [0, 2**63])]), "overflows 64 bits"),
    # a scalar Q8_0 (no dims) took 0 bytes, then reshaping failed (ValueError)
    "scalar q8_0": (gguf([], [info("t", [], 8)], b"\0" * 64), "not a multiple of the Q8_0 block"),
    # general.architecture as an array: `array == "audiocpp"` made is_package ambiguous (ValueError)
    "architecture array": (gguf([numbers("general.architecture", g.U8, [])]), None),
    # float ranks sliced the shapes with floats (TypeError)
    "float ranks": (gguf([PACKAGE, numbers("audiocpp.tensor_ranks", g.F32, [1.0]),
                          numbers("audiocpp.tensor_shapes", g.I64, [4])], [info("t", [4])], b"\0" * 16),
                    "integer arrays"),
    # exact shape (2^62 + 1) * 4 wraps to 4 elements in int64: accepted, then reshape failed
    "shape wrap-around": (gguf([PACKAGE, numbers("audiocpp.tensor_ranks", g.I32, [2]),
                                numbers("audiocpp.tensor_shapes", g.I64, [2**62 + 1, 4])], [info("t", [4])],
                               b"\0" * 16), "too large"),
    "shape over int64": (gguf([PACKAGE, numbers("audiocpp.tensor_ranks", g.I32, [2]),
                               numbers("audiocpp.tensor_shapes", g.U64, [2**63, 2])], [info("t", [0])]),
                         "too large"),
    # a negative start offset sliced the blob from its end; float offsets were accepted
    "negative file offset": (gguf([PACKAGE, strings("audiocpp.embedded_files.names", ["a"]),
                                   numbers("audiocpp.embedded_files.offsets", g.I64, [-3, 2]),
                                   numbers("audiocpp.embedded_files.data", g.U8, [1, 2, 3])]), "outside"),
    "float file offsets": (gguf([PACKAGE, strings("audiocpp.embedded_files.names", ["a"]),
                                 numbers("audiocpp.embedded_files.offsets", g.F32, [0.5, 2.5]),
                                 numbers("audiocpp.embedded_files.data", g.U8, [1, 2, 3])]),
                           "are both required"),
    # a NUL in an embedded file name: ValueError from the file system
    "NUL in a file name": (gguf([PACKAGE, strings("audiocpp.embedded_files.names", ["a\0b"]),
                                 numbers("audiocpp.embedded_files.offsets", g.U64, [0, 2]),
                                 numbers("audiocpp.embedded_files.data", g.U8, [1, 2, 3])]),
                           "control characters"),
    # "a" and "a/b": a file where a folder must go (was blamed on the cache folder)
    "file and folder": (gguf([PACKAGE, strings("audiocpp.embedded_files.names", ["a", "a/b"]),
                              numbers("audiocpp.embedded_files.offsets", g.U64, [0, 1, 2]),
                              numbers("audiocpp.embedded_files.data", g.U8, [1, 2, 3])]), "clashes"),
    "same name twice": (gguf([PACKAGE, strings("audiocpp.embedded_files.names", ["a", "./a"]),
                              numbers("audiocpp.embedded_files.offsets", g.U64, [0, 1, 2]),
                              numbers("audiocpp.embedded_files.data", g.U8, [1, 2, 3])]), "clashes"),
    # legacy contents holding arrays: AttributeError on .encode
    "legacy contents not strings": (gguf([PACKAGE, strings("audiocpp.embedded_files.names", ["a"]),
                                          kv("audiocpp.embedded_files.contents", g.ARRAY,
                                             u32(g.ARRAY) + u64(1) + u32(g.U8) + u64(0))]), "string array"),
    # an embedded spec with a 5000-digit number (ValueError) or 5000 open brackets (RecursionError)
    "spec huge number": (gguf([PACKAGE, kv("audiocpp.model_spec.version", g.U32, u32(1)),
                               string("audiocpp.model_spec.family", "x"),
                               string("audiocpp.model_spec.json", "9" * 5000)]), "not valid JSON"),
    "spec deep": (gguf([PACKAGE, kv("audiocpp.model_spec.version", g.U32, u32(1)),
                        string("audiocpp.model_spec.family", "x"),
                        string("audiocpp.model_spec.json", "[" * 5000)]), "not valid JSON"),
    "spec deep but parseable": (gguf([PACKAGE, kv("audiocpp.model_spec.version", g.U32, u32(1)),
                                      string("audiocpp.model_spec.family", "x"),
                                      string("audiocpp.model_spec.json", "[" * 500 + "]" * 500)]),
                                "deeper than"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fuzz_finding_is_a_clear_error(tmp_path: Path, name: str) -> None:
    data, words = CASES[name]
    path = tmp_path / "found.gguf"
    path.write_bytes(data)
    if words is None:
        read_everything(path)  # a valid (if odd) file: it must simply load
        return
    with pytest.raises((ModelError, SpecError)) as caught:
        read_everything(path)
    assert words in caught.value.message
    assert path.read_bytes() == data


def test_detection_takes_odd_metadata_and_configs(tmp_path: Path) -> None:
    path = tmp_path / "arch.gguf"
    path.write_bytes(gguf([numbers("general.architecture", g.U8, [1, 2])]))
    with pytest.raises(ModelError, match="cannot tell which family"):
        detect(path)
    folder = tmp_path / "folder"
    folder.mkdir()
    for text, words in (("[1, 2]", "not a JSON object"), ("9" * 5000, "not valid JSON"),
                        ("[" * 100_000, "not valid JSON"),
                        ('{"architectures": 7, "model_type": []}', "cannot tell")):
        (folder / "config.json").write_text(text)
        with pytest.raises(ModelError, match=words):
            detect(folder)


def test_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    with pytest.raises(ModelError, match="not a regular file"):
        open_weights(fifo)


def test_a_gguf_truncated_after_opening_is_an_error_not_a_crash(tmp_path: Path) -> None:
    """Reading a page of a mapping past the end of a file cut short kills the process (SIGBUS);
    the size is checked first (the subprocess version is in test_faults.py)."""
    import numpy as np

    from tests.engine.weights_builders import write_gguf

    path = write_gguf(tmp_path / "cut.gguf",
                      {"a": np.ones((64, 64), np.float32), "b": np.ones(8, np.float32)})
    source = open_weights(path)
    with open(path, "r+b") as fh:
        fh.truncate(600)
    with pytest.raises(ModelError, match="changed while it was in use"):
        source.get("a")
