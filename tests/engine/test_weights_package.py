"""audio.cpp-layout package GGUFs: logical names, exact shapes, embedded files and spec."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from audiocpp.engine.errors import ModelError
from audiocpp.engine.weights import PackageSource, cache_dir, open_weights
from tests.engine.weights_builders import write_gguf, write_package

LONG = "weights/model.layers.0.self_attn.some_really_long_module_name.q_proj.weight"  # > 63 bytes


def _tensors() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "weights/embed.weight": rng.standard_normal((10, 32)).astype(np.float32),
        LONG: rng.standard_normal((4, 32)).astype(np.float32),
        "weights/scale": np.array(0.25, dtype=np.float32),
        "weights/dup": np.ones(3, np.float32),
        "codec/conv.weight": rng.standard_normal((8, 4, 3)).astype(np.float32),
        "codec/qconv.weight": rng.standard_normal((8, 4, 8)).astype(np.float32),
        "codec/steps": np.arange(6, dtype=np.int64),
    }


FILES = {
    "config.json": b'{"model_type": "omnivoice"}',
    "tokenizer.json": json.dumps({"version": "1.0", "big": "x" * 5000}).encode(),
    "audio_tokenizer/config.json": b'{"sample_rate": 24000}',
    "empty.txt": b"",
}
SPEC = {"family": "omnivoice", "schema_version": 1}


@pytest.fixture()
def package(tmp_path: Path) -> Path:
    return write_package(
        tmp_path / "pkg.gguf", _tensors(), files=FILES, spec=SPEC,
        flatten={"codec/conv.weight": (8, 12), "codec/qconv.weight": (8, 32)},
        types={"codec/qconv.weight": "Q8_0"},
    )


def test_logical_names_and_exact_shapes(package: Path) -> None:
    src = open_weights(package)
    assert isinstance(src, PackageSource) and src.format == "package"
    tensors = _tensors()
    assert src.names() == list(tensors)
    physical = list(src.gguf.tensors)
    assert physical[1] == "_audiocpp.1" and physical[0] == "weights/embed.weight"
    for name, array in tensors.items():
        info = src.info(name)
        assert info.shape == array.shape, name
        got = src.get(name)
        assert tuple(got.shape) == array.shape
        if name != "codec/qconv.weight":
            assert torch.equal(got, torch.from_numpy(array)), name
    assert src.info("weights/scale").shape == () and src.get("weights/scale").item() == 0.25
    assert src.gguf.tensors["codec/conv.weight"].torch_shape == (8, 12)  # stored flattened
    assert src.info("codec/qconv.weight").dtype == "Q8_0"
    q = src.get("codec/qconv.weight")
    assert (q.dtype == torch.float32
            and float((q - torch.from_numpy(tensors["codec/qconv.weight"])).abs().max()) < 0.05)
    assert src.get("codec/steps").dtype == torch.int64


def test_namespaces_are_prefix_views(package: Path) -> None:
    src = open_weights(package)
    assert src.namespaces() == ["weights", "codec"]
    weights = src.namespace("weights")
    assert weights.names() == ["embed.weight", LONG.split("/", 1)[1], "scale", "dup"]
    assert weights.info("scale").shape == ()
    assert torch.equal(weights.get("embed.weight"), src.get("weights/embed.weight"))
    assert weights.files == src.files and weights.model_spec_json == src.model_spec_json
    with pytest.raises(ModelError, match="namespaces present: weights, codec"):
        src.namespace("audio_tokenizer_weights")


def test_embedded_files_extracted_once_to_the_cache(package: Path) -> None:
    src = open_weights(package)
    assert sorted(src.files) == sorted(FILES)
    root = src.files_root
    assert root is not None and root.parent == cache_dir() / "embedded"
    assert cache_dir() == Path(os.environ["AUDIOCPP_CACHE_DIR"])
    for name, data in FILES.items():
        assert src.files[name] == root / name and src.files[name].read_bytes() == data
    stamp = src.files["config.json"].stat().st_mtime_ns
    again = open_weights(package)
    assert again.files == src.files and again.files["config.json"].stat().st_mtime_ns == stamp
    assert not list(root.rglob(".tmp-*"))


def test_legacy_contents_layout(tmp_path: Path) -> None:
    files = {"config.json": b'{"a": 1}', "sub/x.txt": "héllo".encode()}
    src = open_weights(write_package(tmp_path / "old.gguf", {"weights/a": np.ones(2, np.float32)},
                                     files=files, legacy_files=True))
    assert {n: p.read_bytes() for n, p in src.files.items()} == files


def test_embedded_spec(package: Path, tmp_path: Path) -> None:
    src = open_weights(package)
    assert src.family == "omnivoice" and json.loads(src.model_spec_json) == SPEC
    plain = open_weights(write_package(tmp_path / "nospec.gguf", {"weights/a": np.ones(2, np.float32)}))
    assert plain.model_spec_json is None and plain.family is None and plain.files == {}


def test_package_detected_by_architecture_without_names(tmp_path: Path) -> None:
    src = open_weights(write_gguf(tmp_path / "a.gguf", {"weights/a": np.ones(2, np.float32)},
                                  arch="audiocpp"))
    assert isinstance(src, PackageSource) and src.namespaces() == ["weights"]


def test_plain_gguf_with_slashes_is_not_a_package(tmp_path: Path) -> None:
    src = open_weights(write_gguf(tmp_path / "p.gguf", {"a.b": np.ones(2, np.float32)}, arch="omnivoice-lm"))
    assert src.format == "gguf"


def _rewrite_meta(tmp_path: Path, tensors: dict, metadata: dict) -> Path:
    return write_gguf(tmp_path / "bad.gguf", tensors, arch="audiocpp", metadata=metadata)


def test_inconsistent_package_metadata_is_a_clear_error(tmp_path: Path) -> None:
    t = {"a": np.ones((2, 3), np.float32), "b": np.ones(4, np.float32)}
    with pytest.raises(ModelError, match="1 names for 2 tensors"):
        open_weights(_rewrite_meta(tmp_path, t, {"audiocpp.tensor_names": ["ns/a"]}))
    with pytest.raises(ModelError, match="appears twice"):
        open_weights(_rewrite_meta(tmp_path, t, {"audiocpp.tensor_names": ["ns/a", "ns/a"]}))
    with pytest.raises(ModelError, match=r"exact shape \(7,\)"):
        open_weights(_rewrite_meta(tmp_path, t, {"audiocpp.tensor_names": ["ns/a", "ns/b"],
                                                 "audiocpp.tensor_ranks": [1, 1],
                                                 "audiocpp.tensor_shapes": [7, 4]}))
    with pytest.raises(ModelError, match="trailing"):
        open_weights(_rewrite_meta(tmp_path, t, {"audiocpp.tensor_names": ["ns/a", "ns/b"],
                                                 "audiocpp.tensor_ranks": [2, 1],
                                                 "audiocpp.tensor_shapes": [2, 3, 4, 9]}))
    with pytest.raises(ModelError, match="version 2"):
        open_weights(_rewrite_meta(tmp_path, t, {"audiocpp.model_spec.version": 2,
                                                 "audiocpp.model_spec.family": "x",
                                                 "audiocpp.model_spec.json": "{}"}))


def test_unsafe_or_broken_embedded_files_are_refused(tmp_path: Path) -> None:
    t = {"weights/a": np.ones(2, np.float32)}
    with pytest.raises(ModelError, match="unsafe embedded file name '../evil'"):
        open_weights(write_package(tmp_path / "e.gguf", t, files={"../evil": b"x"}, legacy_files=True))
    with pytest.raises(ModelError, match="unsafe"):
        open_weights(write_package(tmp_path / "f.gguf", t, files={"/etc/x": b"x"}, legacy_files=True))
    with pytest.raises(ModelError, match="outside"):
        open_weights(write_gguf(tmp_path / "g.gguf", t, arch="audiocpp", metadata={
            "audiocpp.embedded_files.names": ["a"], "audiocpp.embedded_files.offsets": [0, 99],
            "audiocpp.embedded_files.data": b"abc"}))
    with pytest.raises(ModelError, match="n\\+1"):
        open_weights(write_gguf(tmp_path / "h.gguf", t, arch="audiocpp", metadata={
            "audiocpp.embedded_files.names": ["a", "b"], "audiocpp.embedded_files.offsets": [0, 3],
            "audiocpp.embedded_files.data": b"abc"}))
