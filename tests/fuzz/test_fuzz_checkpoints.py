"""Fuzz the safetensors reader (single files and sharded indexes) and ``.pth`` loading.

safetensors: mutated valid files, and headers drawn field by field (any JSON in ``dtype``,
``shape`` and ``data_offsets``, huge numbers, deep nesting, lying lengths). ``.pth``: mutated
zip and legacy checkpoints, and pickles that try to import something (``os.system``,
``builtins.eval``, ``subprocess``...): weights-only loading must refuse them, and the
sentinel file they would create must never appear.
"""

from __future__ import annotations

import json
import pickle
import struct
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from . import seeds
from .harness import check, fuzz_settings
from .mutate import INTERESTING, mutated
from .test_fuzz_gguf import read_everything

JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.sampled_from(INTERESTING),
                         st.floats(allow_nan=False), st.text(max_size=8))
JSON = st.recursive(JSON_SCALARS,
                    lambda inner: st.one_of(st.lists(inner, max_size=3),
                                            st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                    max_leaves=8)
DTYPES = ("F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL", "F8_E4M3", "F8_E5M2", "U16",
          "U32", "U64", "Q8", "", "f32")


@st.composite
def safetensors_files(draw: st.DrawFn) -> bytes:
    header: dict[str, object] = {}
    data_len = 0
    for i in range(draw(st.integers(0, 4))):
        dtype = draw(st.sampled_from(DTYPES))
        shape = draw(st.lists(st.integers(0, 4), max_size=3))
        size = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4}.get(
            dtype, 2 if "16" in dtype else 1)
        count = 1
        for d in shape:
            count *= d
        entry: dict[str, object] = {"dtype": dtype, "shape": shape,
                                    "data_offsets": [data_len, data_len + count * size]}
        data_len += count * size
        lie = draw(st.integers(0, 7))
        if lie == 0:
            entry[draw(st.sampled_from(["dtype", "shape", "data_offsets"]))] = draw(JSON)
        elif lie == 1:
            entry["shape"] = draw(st.lists(st.one_of(st.integers(-2, 8), st.sampled_from(INTERESTING)),
                                           max_size=4))
        elif lie == 2:
            entry["data_offsets"] = draw(st.lists(st.one_of(st.integers(-2, 64),
                                                            st.sampled_from(INTERESTING)),
                                                  max_size=3))
        elif lie == 3:
            del entry[draw(st.sampled_from(["dtype", "shape", "data_offsets"]))]
        header[draw(st.one_of(st.just(f"t{i}"), st.text(max_size=6)))] = entry if lie != 4 else draw(JSON)
    if draw(st.booleans()):
        header["__metadata__"] = draw(st.one_of(st.dictionaries(st.text(max_size=5), st.text(max_size=5)),
                                                JSON))
    text = json.dumps(header)
    special = draw(st.integers(0, 9))
    if special == 0:
        text = "[" * draw(st.integers(1000, 20000)) + "]" * 10
    elif special == 1:
        text = text.replace("[", "[" + "9" * 5000 + ",", 1)
    elif special == 2:
        text = text.replace("0", "1e999", 1)
    raw = text.encode()
    length = len(raw)
    if draw(st.integers(0, 5)) == 0:
        length = draw(st.sampled_from(INTERESTING))
    data = draw(st.binary(max_size=32)).ljust(data_len, b"\x01")[
        : max(0, data_len + draw(st.sampled_from([0, 0, 0, -1, 3])))]
    return struct.pack("<Q", length) + raw + data


@given(mutated(seeds.safetensors_seeds(), focus=256))
@fuzz_settings("safetensors_bytes")
def test_mutated_safetensors(fuzz_dir: Path, case: tuple[str, bytes]) -> None:
    path = fuzz_dir / "model.safetensors"
    path.write_bytes(case[1])
    check("safetensors_bytes", lambda: read_everything(path), files=[path])


@given(safetensors_files(), st.one_of(st.none(), JSON))
@fuzz_settings("safetensors_header")
def test_lying_safetensors(fuzz_dir: Path, data: bytes, index: object) -> None:
    path = fuzz_dir / "lies.safetensors"
    path.write_bytes(data)
    check("safetensors_header", lambda: read_everything(path), files=[path])
    if index is not None:  # a sharded index pointing at it, with a drawn JSON where the weight map goes
        index_path = fuzz_dir / "model.safetensors.index.json"
        body = {"weight_map": {"t0": "lies.safetensors", "x": index}} if isinstance(index, str) else \
            {"weight_map": index}
        index_path.write_text(json.dumps(body))
        check("safetensors_header", lambda: read_everything(index_path), files=[path, index_path])


@given(mutated(seeds.torch_seeds(), focus=2048))
@fuzz_settings("torch_bytes")
def test_mutated_torch_checkpoint(fuzz_dir: Path, case: tuple[str, bytes]) -> None:
    path = fuzz_dir / "model.pth"
    path.write_bytes(case[1])
    check("torch_bytes", lambda: read_everything(path), files=[path])


# -- pickles that try to run code -----------------------------------------------------------------
CALLABLES = [("os", "system"), ("posix", "system"), ("builtins", "eval"), ("builtins", "exec"),
             ("subprocess", "call"), ("builtins", "open"), ("pathlib", "Path.touch"), ("shutil", "rmtree"),
             ("torch._utils", "_rebuild_tensor_v2"), ("collections", "OrderedDict"), ("builtins", "getattr"),
             ("torch", "load"), ("numpy.core.multiarray", "_reconstruct"), ("builtins", "__import__")]


def _global(module: str, name: str, protocol: int) -> bytes:
    if protocol >= 4:
        return (pickle.SHORT_BINUNICODE + bytes([len(module)]) + module.encode()
                + pickle.SHORT_BINUNICODE + bytes([len(name)]) + name.encode() + pickle.STACK_GLOBAL)
    return pickle.GLOBAL + module.encode() + b"\n" + name.encode() + b"\n"


@st.composite
def hostile_pickles(draw: st.DrawFn, sentinel: Path) -> bytes:
    """A pickle whose top object calls an importable callable with a command that would create
    ``sentinel``; wrapped in a state-dict-like dict, at protocol 2 or 4."""
    module, name = draw(st.sampled_from(CALLABLES))
    protocol = draw(st.sampled_from([2, 4]))
    command = f"touch {sentinel}" if name == "system" else f"open({str(sentinel)!r}, 'w')"
    arg = command.encode()
    call = (_global(module, name, protocol) + pickle.BINUNICODE + struct.pack("<I", len(arg)) + arg
            + pickle.TUPLE1 + pickle.REDUCE)
    if draw(st.booleans()):
        call = pickle.EMPTY_DICT + pickle.SHORT_BINUNICODE + b"\x01a" + call + pickle.SETITEM
    return pickle.PROTO + bytes([protocol]) + call + pickle.STOP


@given(st.data())
@fuzz_settings("torch_pickle")
def test_pickles_that_import_are_refused(fuzz_dir: Path, data: st.DataObject) -> None:
    import io
    import zipfile

    sentinel = fuzz_dir / "pwned"
    payload = data.draw(hostile_pickles(sentinel))
    path = fuzz_dir / "evil.pth"
    if data.draw(st.booleans()):  # inside a torch zip archive, as data.pkl
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            zf.writestr("archive/data.pkl", payload)
            zf.writestr("archive/version", "3\n")
            zf.writestr("archive/byteorder", "little")
        payload = buf.getvalue()
    path.write_bytes(payload)
    outcome = check("torch_pickle", lambda: read_everything(path), files=[path])
    assert not sentinel.exists(), "a weights-only load ran code from the pickle"
    assert isinstance(outcome, Exception), "a pickle that imports a callable was loaded"
