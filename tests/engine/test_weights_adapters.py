"""Tensor adapters: each op, laziness and composition."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from audiocpp.engine.errors import ModelError
from audiocpp.engine.weights import (
    AdaptedSource,
    Cast,
    Drop,
    FoldWeightNorm,
    Fuse,
    Keep,
    Permute,
    Rename,
    Reshape,
    Split,
    Synthesize,
    TensorInfo,
    TensorSource,
    Transform,
    Transpose,
    adapt,
    full,
    identity,
    ones,
    open_weights,
    zeros,
)
from tests.engine.weights_builders import write_gguf


class DictSource(TensorSource):
    """In-memory source that counts reads (to check laziness)."""

    format = "test"

    def __init__(self, tensors: dict[str, torch.Tensor]) -> None:
        self.tensors, self.reads = tensors, []
        self.metadata, self.files = {"k": 1}, {}

    def names(self) -> list[str]:
        return list(self.tensors)

    def info(self, name: str) -> TensorInfo:
        t = self.tensors[name]
        return TensorInfo(name, tuple(t.shape),
                          {torch.float32: "F32", torch.float16: "F16"}.get(t.dtype, "I64"))

    def get(self, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
        self.reads.append(name)
        t = self.tensors[name]
        return t if dtype is None else t.to(dtype)


def _src(**tensors: torch.Tensor) -> DictSource:
    return DictSource({k.replace("__", "."): v for k, v in tensors.items()})


def test_rename_mapping_regex_function_and_collisions() -> None:
    src = _src(blk__0__w=torch.ones(2), blk__1__w=torch.zeros(2), out=torch.ones(1))
    a = adapt(src, [Rename({"out": "head.weight"}), Rename(r"^blk\.(\d+)\.", r"layers.\1."),
                    Rename(str.upper)])
    assert a.names() == ["LAYERS.0.W", "LAYERS.1.W", "HEAD.WEIGHT"]
    assert torch.equal(a.get("LAYERS.1.W"), torch.zeros(2)) and a.metadata == {"k": 1}
    with pytest.raises(ModelError, match="both become 'x'"):
        adapt(src, [Rename(lambda n: "x")])


def test_adapters_are_lazy() -> None:
    src = _src(a=torch.ones(2, 3), b=torch.ones(4))
    a = adapt(src, [Rename(r"^", "m."), Transpose("m.a"), Drop("m.b"), Cast("*", torch.float16)])
    assert a.names() == ["m.a"] and a.info("m.a") == TensorInfo("m.a", (3, 2), "F16")
    assert src.reads == []
    assert a.get("m.a").dtype == torch.float16 and src.reads == ["a"]


def test_drop_keep_and_unknown_names() -> None:
    src = _src(a__num_batches_tracked=torch.tensor(1), a__weight=torch.ones(1), b__weight=torch.ones(1))
    assert adapt(src, [Drop("*.num_batches_tracked")]).names() == ["a.weight", "b.weight"]
    assert adapt(src, [Keep("b.*", "a.weight")]).names() == ["a.weight", "b.weight"]
    with pytest.raises(ModelError, match="did you mean a.weight"):
        adapt(src, [Drop("b.*")]).get("a.weigth")


@pytest.mark.filterwarnings("ignore:.*weight_norm.*deprecated:FutureWarning")
@pytest.mark.parametrize("style", ["suffix", "parametrizations"])
@pytest.mark.parametrize("kind", ["linear", "conv", "convtranspose"])
def test_fold_weight_norm_matches_torch(style: str, kind: str) -> None:
    torch.manual_seed(0)
    layer = {"linear": nn.Linear(6, 4), "conv": nn.Conv1d(3, 5, 3),
             "convtranspose": nn.ConvTranspose1d(5, 3, 4)}[kind]
    dim = 0
    if style == "suffix":
        wn = nn.utils.weight_norm(layer, dim=dim)
    else:
        wn = nn.utils.parametrizations.weight_norm(layer, dim=dim)
    with torch.no_grad():
        for p in wn.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    # refresh the hook's weight
    wn(torch.randn(2, 6) if kind == "linear" else torch.randn(1, wn.in_channels, 8))
    state = {f"vae.block.{k}": v.detach().clone() for k, v in wn.state_dict().items()}
    state["other.weight_g"] = torch.ones(1)  # unpaired and outside the prefix: left alone
    folded = adapt(DictSource(state), [FoldWeightNorm(prefix="vae.", dim=dim)])
    assert sorted(folded.names()) == ["other.weight_g", "vae.block.bias", "vae.block.weight"]
    assert folded.info("vae.block.weight").shape == tuple(layer.weight.shape)
    torch.testing.assert_close(folded.get("vae.block.weight"), wn.weight.detach(), rtol=0, atol=0)
    inferred = adapt(DictSource(state), [FoldWeightNorm(prefix="vae.", dim=None)])
    torch.testing.assert_close(inferred.get("vae.block.weight"), wn.weight.detach(), rtol=0, atol=0)


def test_fold_weight_norm_keeps_half_dtype() -> None:
    v, g = torch.randn(4, 3), torch.rand(4, 1) + 0.5
    src = DictSource({"w_v": v.half(), "w_g": g.half()})
    out = adapt(src, [FoldWeightNorm()])
    assert out.info("w").dtype == "F16" and out.get("w").dtype == torch.float16
    expected = torch._weight_norm(v.half().float(), g.half().float(), 0)
    torch.testing.assert_close(out.get("w", torch.float32), expected)


def test_transpose_permute_reshape() -> None:
    x = torch.arange(24.0).reshape(2, 3, 4)
    src = _src(x=x, y=x.clone(), z=x.clone())
    a = adapt(src, [Permute("x", (2, 0, 1)), Transpose("y", 1, 2), Reshape("z", (6, -1))])
    assert a.info("x").shape == (4, 2, 3) and torch.equal(a.get("x"), x.permute(2, 0, 1))
    assert a.info("y").shape == (2, 4, 3) and torch.equal(a.get("y"), x.transpose(1, 2))
    assert a.info("z").shape == (6, 4) and torch.equal(a.get("z"), x.reshape(6, 4))
    b = adapt(src, [Reshape("x", lambda s: (s[0] * s[1], s[2]))])
    assert b.info("x").shape == (6, 4)
    with pytest.raises(ModelError, match="cannot reshape"):
        adapt(src, [Reshape("x", (5, 5))]).info("x")
    with pytest.raises(ModelError, match="cannot permute"):
        adapt(src, [Permute("x", (1, 0))]).info("x")


def test_split_fused_qkv_and_fuse_back() -> None:
    q, k, v = torch.randn(4, 8), torch.randn(2, 8), torch.randn(2, 8)
    src = _src(layers__0__qkv__weight=torch.cat([q, k, v]), layers__1__qkv__weight=torch.cat([q, k, v]) + 1)
    split = adapt(src, [Split(r"(.+)\.qkv\.weight", [r"\1.q.weight", r"\1.k.weight", r"\1.v.weight"],
                              sizes=(4, 2, 2))])
    assert split.names() == [f"layers.{i}.{p}.weight" for i in (0, 1) for p in "qkv"]
    assert split.info("layers.0.k.weight").shape == (2, 8)
    assert (torch.equal(split.get("layers.0.q.weight"), q)
            and torch.equal(split.get("layers.1.v.weight"), v + 1))
    src.reads.clear()
    for i in (0, 1):
        for part in "qkv":
            split.get(f"layers.{i}.{part}.weight")
    assert src.reads == ["layers.0.qkv.weight", "layers.1.qkv.weight"]  # each fused tensor read once
    fused = adapt(split, [Fuse([r"(.+)\.q\.weight", r"\1.k.weight", r"\1.v.weight"], into=r"\1.qkv.weight")])
    assert fused.names() == ["layers.0.qkv.weight", "layers.1.qkv.weight"]
    assert fused.info("layers.0.qkv.weight").shape == (8, 8)
    assert torch.equal(fused.get("layers.0.qkv.weight"), src.tensors["layers.0.qkv.weight"])
    equal = adapt(src, [Split(r"layers\.0\.qkv\.weight", ["a", "b"], dim=1)])
    assert equal.info("a").shape == (8, 4) and torch.equal(equal.get("b"), torch.cat([q, k, v])[:, 4:])
    with pytest.raises(ModelError, match="3 equal parts"):
        adapt(src, [Split(r"layers\.0\.qkv\.weight", ["a", "b", "c"], dim=1)]).info("a")
    with pytest.raises(ModelError, match="x.k missing"):
        adapt(_src(x__q=torch.ones(1)), [Fuse([r"(.+)\.q", r"\1.k"], into=r"\1.qk")])


def test_synthesize_constants_and_computed() -> None:
    src = _src(a=torch.full((3,), 2.0))
    s = adapt(src, [
        Synthesize("x.weight", lambda s: torch.ones(4)),
        Synthesize("eye", identity(3)),
        Synthesize("z", zeros(2, 2)),
        Synthesize("o", ones(2)),
        Synthesize("f", full((2,), 7.0)),
        Synthesize("double_a", lambda s: s.get("a") * 2),
        Synthesize("a", torch.zeros(3), if_missing=True),  # present: kept
        Synthesize("c", torch.arange(3)),
    ])
    assert s.info("x.weight") == TensorInfo("x.weight", (4,), "F32")
    assert torch.equal(s.get("eye"), torch.eye(3)) and torch.equal(s.get("z"), torch.zeros(2, 2))
    assert torch.equal(s.get("o"), torch.ones(2)) and torch.equal(s.get("f"), torch.full((2,), 7.0))
    assert (torch.equal(s.get("double_a"), torch.full((3,), 4.0))
            and torch.equal(s.get("a"), torch.full((3,), 2.0)))
    assert s.info("c").dtype == "I64" and s.get("x.weight", torch.float16).dtype == torch.float16
    replaced = adapt(src, [Synthesize("a", torch.zeros(3))])
    assert torch.equal(replaced.get("a"), torch.zeros(3))


def test_transform_and_cast() -> None:
    src = _src(w=torch.arange(6.0).reshape(2, 3))
    t = adapt(src, [Transform("w", lambda x: x.flip(0), shape=lambda s: s), Cast("w", torch.float16)])
    assert t.info("w").dtype == "F16" and torch.equal(t.get("w", torch.float32),
                                                      torch.arange(6.0).reshape(2, 3).flip(0))
    lazyless = adapt(src, [Transform("w", lambda x: x.sum(0))])
    assert lazyless.info("w").shape == (3,)


def test_adapted_gguf_source_keeps_metadata(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "v.gguf", {"audio_vae.enc.weight_g": np.ones((4, 1, 1), np.float32),
                                             "audio_vae.enc.weight_v": np.ones((4, 2, 3), np.float32),
                                             "token_embd.weight": np.ones((5, 4), np.float32)}, arch="llama")
    src = open_weights(path)
    a = AdaptedSource(src, [FoldWeightNorm(prefix="audio_vae."), Transpose("token_embd.weight"),
                            Rename({"token_embd.weight": "embed.weight"})])
    assert a.format == "gguf" and a.metadata["general.architecture"] == "llama" and a.path == path
    assert sorted(a.names()) == ["audio_vae.enc.weight", "embed.weight"]
    assert a.info("embed.weight").shape == (4, 5)
    torch.testing.assert_close(a.get("audio_vae.enc.weight"), torch.full((4, 2, 3), 1 / 6 ** 0.5))
