"""inspect_path (what `audiocpp inspect` prints) for packages, plain GGUFs and folders."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from audiocpp.engine.errors import ModelError
from audiocpp.engine.inspect import inspect_path
from tests.engine.test_weights_resolve import OMNI_FILES, omnivoice_folder, spec
from tests.engine.weights_builders import write_gguf, write_package
from tests.support import run_cli


def _package(path: Path) -> Path:
    return write_package(path, {
        "weights/a.weight": np.ones((4, 32), np.float32),
        "weights/b.weight": np.ones((4, 32), np.float32),
        "weights/norm": np.ones(4, np.float32),
        "audio_tokenizer_weights/conv.weight": np.ones((2, 3, 4), np.float16),
    }, files={n: b"{}" for n in OMNI_FILES}, spec={"family": "omnivoice"},
        types={"weights/a.weight": "Q8_0", "weights/b.weight": "Q8_0"}, weight_type="q8_0")


def test_inspect_package(tmp_path: Path) -> None:
    info = inspect_path(_package(tmp_path / "omnivoice-q8_0.gguf"), "omnivoice", spec("omnivoice"))
    assert info.family == "omnivoice" and info.format == "package" and info.num_tensors == 4
    assert info.namespaces == {"weights": 3, "audio_tokenizer_weights": 1}
    assert info.dtype_counts == {"F16": 1, "F32": 1, "Q8_0": 2}
    assert info.embedded_files == sorted(OMNI_FILES)
    assert info.metadata["general.architecture"] == "audiocpp"
    assert info.metadata["audiocpp.weight_type"] == "q8_0"
    assert info.metadata["audiocpp.model_spec.family"] == "omnivoice"
    assert info.spec_summary["family"] == "omnivoice"


def test_inspect_plain_gguf(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "lm.gguf",
                      {"blk.0.w": np.ones((2, 32), np.float32), "t": np.ones(2, np.float16)},
                      arch="omnivoice-lm")
    info = inspect_path(path, "omnivoice", spec("omnivoice"))
    assert info.format == "gguf" and info.num_tensors == 2 and info.namespaces == {}
    assert info.dtype_counts == {"F16": 1, "F32": 1} and info.embedded_files == []
    assert info.metadata == {"general.architecture": "omnivoice-lm"}


def test_inspect_folder(tmp_path: Path) -> None:
    folder = omnivoice_folder(tmp_path / "OmniVoice")
    info = inspect_path(folder, "omnivoice", spec("omnivoice"))
    assert info.format == "folder" and info.num_tensors == 2
    assert info.namespaces == {"weights": 1, "audio_tokenizer_weights": 1}
    assert info.dtype_counts == {"F32": 2}
    assert set(OMNI_FILES) <= set(info.embedded_files)
    assert info.metadata["source"] == "hf_folder (safetensors)"


def test_inspect_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        inspect_path(tmp_path / "nope.gguf", "omnivoice", spec("omnivoice"))
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUX" + b"\0" * 40)
    with pytest.raises(ModelError, match="not a GGUF file"):
        inspect_path(bad, "omnivoice", spec("omnivoice"))


def test_cli_inspect_of_a_package(tmp_path: Path) -> None:
    path = _package(tmp_path / "omnivoice-q8_0.gguf")
    proc = run_cli("inspect", path, "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["family"] == "omnivoice" and data["format"] == "package"
    assert data["namespaces"] == {"weights": 3, "audio_tokenizer_weights": 1}
    assert data["dtypes"]["Q8_0"] == 2
