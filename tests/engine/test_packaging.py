"""Package writer round trips: every written type, read back with the weights reader."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as T

from audiocpp.engine.errors import ModelError, UsageError
from audiocpp.engine.packaging import MODEL_INPUT, PackagePlan, plan_from_spec, write_package
from audiocpp.engine.weights.gguf_file import GGUFFile
from audiocpp.engine.weights.open import open_weights
from audiocpp.engine.weights.resolve import resolve_weights
from audiocpp.engine.weights.source import TensorInfo, TensorSource, dtype_name

from .packaging_inputs import (
    LONG_NAME,
    NAME_63,
    NAME_64,
    SIDECARS,
    codec_tensors,
    lm_tensors,
    make_spec,
    model_folder,
)

FLOAT_OUT = {"f32": T.F32, "f16": T.F16, "bf16": T.BF16}
BLOCK_OUT = {"q8_0": T.Q8_0, "q4_0": T.Q4_0}
TORCH_OF = {T.F32: torch.float32, T.F16: torch.float16, T.BF16: torch.bfloat16}


class MemorySource(TensorSource):
    format = "memory"

    def __init__(self, tensors: dict[str, torch.Tensor], fail_on: str | None = None) -> None:
        self.tensors, self.fail_on = tensors, fail_on
        self.metadata, self.files = {}, {}

    def names(self) -> list[str]:
        return list(self.tensors)

    def info(self, name: str) -> TensorInfo:
        t = self.tensors[name]
        return TensorInfo(name, tuple(t.shape), dtype_name(t.dtype))

    def get(self, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
        if name == self.fail_on:
            raise ModelError(f"cannot read {name}")
        t = self.tensors[name]
        return t if dtype is None else t.to(dtype)


def expected_type(logical: str, t: torch.Tensor, wtype: str) -> T:
    ns, name = logical.split("/", 1)
    if not t.is_floating_point():
        return {torch.int64: T.I64, torch.bool: T.I8, torch.uint8: T.I16}[t.dtype]
    if t.dim() <= 1 or ns == "codec":
        return T.F32
    if name.startswith("half."):
        return T.F16
    if wtype in FLOAT_OUT:
        return FLOAT_OUT[wtype]
    quantizable = (t.dim() == 2 and name.endswith(".weight") and name != "embed.weight"
                   and t.shape[-1] % 32 == 0)
    return BLOCK_OUT[wtype] if quantizable else T.F16


def block_bound(x: np.ndarray, qtype: T) -> np.ndarray:
    """Per-element |error| bound of ggml's Q8_0/Q4_0 from each block's scale (rows of 32)."""
    blocks = x.reshape(-1, 32).astype(np.float32)
    if qtype == T.Q8_0:
        d = np.abs(blocks).max(axis=1, keepdims=True) / 127
        d16 = d.astype(np.float16).astype(np.float32)
        bound = 0.5 * d + 127 * np.abs(d - d16)
    else:
        imax = np.abs(blocks).argmax(axis=1)[:, None]
        d = np.take_along_axis(blocks, imax, axis=1) / -8
        d16 = d.astype(np.float16).astype(np.float32)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(d == 0, 0, blocks / d)
        # q = clip(trunc(x/d + 8.5), 0, 15): error <= |d|/2, or <= |d| where x/d > 7.5 is clipped.
        bound = np.where(ratio > 7.5, np.abs(d), 0.5 * np.abs(d)) + 8 * np.abs(d - d16)
    return (np.broadcast_to(bound, blocks.shape) * (1 + 1e-5) + 1e-12).reshape(x.shape)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return model_folder(tmp_path_factory.mktemp("model") / "TinyModel")


@pytest.fixture(scope="module")
def inputs() -> dict[str, torch.Tensor]:
    out = {f"w/{k}": v for k, v in lm_tensors().items()}
    out.update({f"codec/{k}": v for k, v in codec_tensors().items()})
    return out


@pytest.mark.parametrize("wtype", ["f32", "f16", "bf16", "q8_0", "q4_0"])
def test_round_trip_every_type(wtype: str, folder: Path, inputs: dict[str, torch.Tensor],
                               tmp_path: Path) -> None:
    spec = make_spec()
    plan = plan_from_spec(spec, {MODEL_INPUT: folder})
    out = tmp_path / f"pkg-{wtype}.gguf"
    summary = write_package(plan, out, wtype)
    assert out.stat().st_size == summary.file_size
    source = open_weights(out)
    assert source.format == "package"
    assert source.namespaces() == ["w", "codec"]
    assert sorted(source.names()) == sorted(inputs)
    for name, original in inputs.items():
        info = source.info(name)
        assert info.shape == tuple(original.shape), name
        want = expected_type(name, original, wtype)
        assert info.dtype == want.name, (name, info.dtype, want.name)
        got = source.get(name)
        assert tuple(got.shape) == tuple(original.shape), name
        if not original.is_floating_point():
            assert torch.equal(got.to(torch.int64), original.to(torch.int64)), name
        elif want in TORCH_OF:
            assert torch.equal(got.to(torch.float32), original.to(TORCH_OF[want]).to(torch.float32)), name
        else:
            x = original.to(torch.float32).numpy()
            ref = gguf.quants.dequantize(gguf.quants.quantize(x.reshape(-1, x.shape[-1]), want), want)
            assert np.array_equal(got.numpy(), ref.reshape(x.shape)), name  # bit-exact with ggml
            err = np.abs(got.numpy() - x)
            assert (err <= block_bound(x, want)).all(), (name, float(err.max()))
    counts = summary.by_type()
    assert sum(n for n, _ in counts.values()) == len(inputs)


def test_layout_metadata_and_files(folder: Path, inputs: dict[str, torch.Tensor], tmp_path: Path) -> None:
    spec = make_spec()
    spec_text = json.dumps(json.loads(json.dumps(spec.model_dump(mode="json", by_alias=True,
                                                                 exclude_unset=True))))
    plan = plan_from_spec(spec, {MODEL_INPUT: folder}, spec_json=spec_text)
    out = tmp_path / "pkg.gguf"
    write_package(plan, out, "q8_0")
    meta = GGUFFile(out).metadata
    assert meta["general.architecture"] == "audiocpp"
    assert meta["general.name"] == "TinyModel"
    assert meta["audiocpp.tensor_name_format"] == "native"
    assert meta["audiocpp.source_format"] == "folder"  # one model folder as the input
    assert meta["audiocpp.weight_type"] == "q8_0"
    assert meta["audiocpp.model_spec.version"] == 1
    assert meta["audiocpp.model_spec.family"] == "pkgtest"
    assert meta["audiocpp.model_spec.json"] == spec_text
    assert meta["audiocpp.tensor_sources.names"] == ["w", "codec"]
    assert meta["audiocpp.tensor_sources.paths"] == ["model.safetensors", "codec/model.safetensors"]
    # Exact shapes, PyTorch order, rank 0 for the scalar.
    names = meta["audiocpp.tensor_names"]
    ranks = meta["audiocpp.tensor_ranks"].tolist()
    dims = meta["audiocpp.tensor_shapes"].tolist()
    shapes, cursor = {}, 0
    for name, rank in zip(names, ranks):
        shapes[name] = tuple(dims[cursor: cursor + rank])
        cursor += rank
    assert shapes == {k: tuple(v.shape) for k, v in inputs.items()}
    assert shapes["w/scale"] == ()
    # Physical names: logical, or _audiocpp.<i> from 64 bytes on.
    physical = list(GGUFFile(out).tensors)
    for i, (logical, phys) in enumerate(zip(names, physical)):
        if len(logical.encode()) >= 64:
            assert phys == f"_audiocpp.{i}"
        else:
            assert phys == logical
    assert NAME_63 in physical and NAME_64 not in physical and f"w/{LONG_NAME}" not in physical
    # Embedded files: identical bytes, under the package source's names.
    source = open_weights(out)
    assert sorted(source.embedded_file_names()) == sorted(SIDECARS)
    for name, data in SIDECARS.items():
        assert source.embedded_bytes(name) == data
        assert source.files[name].read_bytes() == data
    # Families resolve packages through the spec's package source.
    resolved = resolve_weights(spec, out)
    assert resolved.source_id == "package" and resolved.family == "pkgtest"
    assert set(resolved.namespaces) == {"w", "codec"} and len(resolved.namespace("codec")) == 4
    assert resolved.file("codec_config").read_bytes() == SIDECARS["codec/config.json"]
    assert resolved.file("chat_template").read_bytes() == SIDECARS["chat_template.jinja"]


def test_gguf_py_reads_the_package_with_the_declared_kv_types(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "pkg.gguf"
    write_package(plan_from_spec(make_spec(), {MODEL_INPUT: folder}), out, "q4_0")
    reader = gguf.GGUFReader(out)
    V = gguf.GGUFValueType

    def types(key: str) -> list[gguf.GGUFValueType]:
        return reader.get_field(key).types

    assert types("audiocpp.model_spec.version") == [V.UINT32]
    assert types("audiocpp.tensor_ranks") == [V.ARRAY, V.INT32]
    assert types("audiocpp.tensor_shapes") == [V.ARRAY, V.INT64]
    assert types("audiocpp.embedded_files.offsets") == [V.ARRAY, V.UINT64]
    assert types("audiocpp.embedded_files.data") == [V.ARRAY, V.UINT8]
    assert types("audiocpp.embedded_files.names") == [V.ARRAY, V.STRING]
    assert types("audiocpp.tensor_names") == [V.ARRAY, V.STRING]
    mine = GGUFFile(out)
    for t in reader.tensors:
        info = mine.tensors[t.name]
        assert tuple(int(d) for d in t.shape) == info.ne
        assert t.tensor_type == info.ggml_type
        assert np.array_equal(np.asarray(t.data).reshape(-1).view(np.uint8), mine.raw(t.name))
        assert info.offset % 32 == 0


def test_re_encoding_a_package_keeps_namespaces_and_files(folder: Path, tmp_path: Path) -> None:
    first = tmp_path / "a.gguf"
    write_package(plan_from_spec(make_spec(), {MODEL_INPUT: folder}), first, "f16")
    plan = plan_from_spec(make_spec(), {MODEL_INPUT: first})
    assert set(plan.namespaces) == {"w", "codec"}
    second = tmp_path / "b.gguf"
    write_package(plan, second, "f32")
    a, b = open_weights(first), open_weights(second)
    assert a.names() == b.names()
    for name in a.names():
        assert torch.equal(a.get(name).to(torch.float64), b.get(name).to(torch.float64)), name
    assert {n: b.embedded_bytes(n) for n in b.embedded_file_names()} == SIDECARS


def test_explicit_namespaces_and_sidecars_beside_the_first_input(folder: Path, tmp_path: Path) -> None:
    plan = plan_from_spec(make_spec(), {"w": folder, "codec": folder / "codec" / "model.safetensors"})
    assert plan.source_paths == {"w": "model.safetensors", "codec": "codec/model.safetensors"}
    assert sorted(plan.files) == sorted(SIDECARS)
    out = tmp_path / "x.gguf"
    write_package(plan, out, "f32")
    assert open_weights(out).namespaces() == ["w", "codec"]


def test_missing_namespace_and_missing_sidecar_fail_before_writing(tmp_path: Path) -> None:
    spec = make_spec()
    partial = model_folder(tmp_path / "partial", skip=("codec",))
    with pytest.raises(ModelError, match="codec"):
        plan_from_spec(spec, {MODEL_INPUT: partial})
    plan = plan_from_spec(spec, {"w": partial / "model.safetensors"})
    out = tmp_path / "out.gguf"
    with pytest.raises(UsageError, match="namespace.*codec"):
        write_package(plan, out, "f32")
    no_tok = model_folder(tmp_path / "no_tok", skip=("tokenizer.json",))
    plan = plan_from_spec(spec, {MODEL_INPUT: no_tok})
    with pytest.raises(ModelError, match="tokenizer.json"):
        write_package(plan, out, "f32")
    assert not out.exists() and list(tmp_path.glob("*.tmp")) == []


def test_unknown_namespace_is_refused(folder: Path, tmp_path: Path) -> None:
    plan = plan_from_spec(make_spec(), {MODEL_INPUT: folder, "wieghts": folder / "model.safetensors"})
    with pytest.raises(UsageError, match="wieghts"):
        write_package(plan, tmp_path / "x.gguf", "f32")


def test_a_failing_tensor_leaves_no_file_and_keeps_the_old_output(tmp_path: Path) -> None:
    spec = make_spec()
    tensors = {"a.weight": torch.randn(4, 32), "b.weight": torch.randn(4, 32)}
    plan = PackagePlan(family="pkgtest", spec=spec, files=dict(SIDECARS),
                       namespaces={"w": MemorySource(tensors, fail_on="b.weight"),
                                   "codec": MemorySource({"c": torch.ones(3)})})
    out = tmp_path / "x.gguf"
    with pytest.raises(ModelError, match="cannot read b.weight"):
        write_package(plan, out, "q8_0")
    assert list(tmp_path.iterdir()) == []
    out.write_bytes(b"old")
    with pytest.raises(UsageError, match="already exists"):
        write_package(plan, out, "q8_0")
    with pytest.raises(ModelError):
        write_package(plan, out, "q8_0", overwrite=True)
    assert out.read_bytes() == b"old" and list(tmp_path.iterdir()) == [out]


def test_memory_plan_without_spec_and_extra_metadata(tmp_path: Path) -> None:
    plan = PackagePlan(family="anything", namespaces={"m": MemorySource({"x.weight": torch.randn(2, 32)})},
                       files={"notes.txt": b"hi"},
                      metadata={"anything.answer": 42, "anything.tags": ["a", "b"]})
    out = tmp_path / "x.gguf"
    write_package(plan, out, "f16")
    meta = GGUFFile(out).metadata
    assert "audiocpp.model_spec.json" not in meta
    assert meta["anything.answer"] == 42 and meta["anything.tags"] == ["a", "b"]
    assert open_weights(out).embedded_bytes("notes.txt") == b"hi"
    bad = PackagePlan(family="x", namespaces=plan.namespaces, metadata={"audiocpp.tensor_names": ["y"]})
    with pytest.raises(UsageError, match="reserved"):
        write_package(bad, tmp_path / "y.gguf", "f16")


def test_re_encoding_in_place_with_overwrite(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.gguf"
    write_package(plan_from_spec(make_spec(), {MODEL_INPUT: folder}), out, "f32")
    before = open_weights(out).get("w/layers.0.q_proj.weight").clone()
    write_package(plan_from_spec(make_spec(), {MODEL_INPUT: out}), out, "q8_0", overwrite=True)
    after = open_weights(out)
    assert after.info("w/layers.0.q_proj.weight").dtype == "Q8_0"
    assert torch.allclose(after.get("w/layers.0.q_proj.weight"), before, atol=2e-3)
    assert sorted(after.embedded_file_names()) == sorted(SIDECARS)


def test_unwritable_destination_is_a_clean_error(folder: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ModelError, match="cannot write"):
        write_package(plan_from_spec(make_spec(), {MODEL_INPUT: folder}), blocker / "sub" / "m.gguf", "f32")


def test_a_family_override_of_package_plan_is_used(folder: Path, tmp_path: Path) -> None:
    from audiocpp.engine.packaging.cli import build_plan
    from audiocpp.engine.plugin import FamilyPlugin

    spec = make_spec()

    class Custom(FamilyPlugin):
        name = "pkgtest"

        def package_plan(self, inputs, load_options=None):  # type: ignore[override]
            plan = plan_from_spec(spec, inputs)
            plan.metadata["pkgtest.converted_by"] = "custom"
            return plan

    plan = build_plan({MODEL_INPUT: folder}, spec, "{}", Custom(), spec_given=False)
    assert plan.metadata == {"pkgtest.converted_by": "custom"} and plan.spec_json == "{}"
    out = tmp_path / "c.gguf"
    write_package(plan, out, "f16")
    assert GGUFFile(out).metadata["pkgtest.converted_by"] == "custom"
    default = build_plan({MODEL_INPUT: folder}, spec, None, FamilyPlugin(), spec_given=False)
    assert default.metadata == {}
