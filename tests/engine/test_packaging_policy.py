"""The quantization policy: one decision per tensor kind, keep-type precedence, type parsing."""

from __future__ import annotations

import pytest
from gguf import GGMLQuantizationType as T

from audiocpp.engine.errors import UsageError
from audiocpp.engine.packaging import QuantizationPolicy, parse_keep_type, parse_weight_type
from audiocpp.engine.packaging.policy import KeepRule

from .packaging_inputs import make_spec


def policy(wtype: str, *cli: str) -> QuantizationPolicy:
    return QuantizationPolicy.from_spec(make_spec(), parse_weight_type(wtype),
                                        tuple(parse_keep_type(c) for c in cli))


@pytest.mark.parametrize(("name", "shape", "dtype", "q8", "f16", "bf16"), [
    ("w/layers.0.q_proj.weight", (64, 64), "F32", T.Q8_0, T.F16, T.BF16),
    ("w/layers.0.q_proj.weight", (64, 64), "BF16", T.Q8_0, T.F16, T.BF16),
    ("w/layers.0.q_proj.weight", (64, 64), "Q4_K", T.Q8_0, T.F16, T.BF16),  # re-encoding a K-quant
    ("w/embed.weight", (100, 64), "F32", T.F16, T.F16, T.BF16),  # lookup table
    ("codec/codebook.embed", (16, 64), "F32", T.F32, T.F32, T.F32),  # lookup table in a f32 namespace
    ("w/layers.0.norm.weight", (64,), "F32", T.F32, T.F32, T.F32),  # 1-D
    ("w/scale", (), "F16", T.F32, T.F32, T.F32),  # scalar
    ("w/conv.weight", (16, 8, 3), "F32", T.F16, T.F16, T.BF16),  # conv kernel
    ("w/conv.weight", (16, 8, 3, 3), "F32", T.F16, T.F16, T.BF16),
    ("codec/dec.conv.weight", (16, 8, 3), "F32", T.F32, T.F32, T.F32),  # spec keep f32
    ("w/odd.weight", (16, 48), "F32", T.F16, T.F16, T.BF16),  # row not a multiple of 32
    ("w/pos_bias", (16, 64), "F32", T.F16, T.F16, T.BF16),  # not *.weight
    ("w/half.proj.weight", (16, 64), "F32", T.F16, T.F16, T.F16),  # spec keep f16
    ("w/offsets", (8,), "I64", T.I64, T.I64, T.I64),
    ("w/ids", (2, 64), "I32", T.I32, T.I32, T.I32),  # 2-D integers are never quantized
    ("w/mask", (3,), "BOOL", T.I8, T.I8, T.I8),
    ("w/bytes", (3,), "U8", T.I16, T.I16, T.I16),
    ("w/empty.weight", (0, 64), "F32", T.F32, T.F32, T.F32),
])
def test_decisions(name: str, shape: tuple[int, ...], dtype: str, q8: T, f16: T, bf16: T) -> None:
    assert policy("q8_0").decide(name, shape, dtype).ggml_type == q8
    assert policy("f16").decide(name, shape, dtype).ggml_type == f16
    assert policy("bf16").decide(name, shape, dtype).ggml_type == bf16
    f32 = policy("f32").decide(name, shape, dtype).ggml_type
    assert f32 == (q8 if q8 in (T.I8, T.I16, T.I32, T.I64)
                   else T.F16 if name.startswith("w/half.") else T.F32)


def test_q4_0_follows_the_same_rules() -> None:
    p = policy("q4_0")
    assert p.decide("w/a.weight", (8, 64), "F32").ggml_type == T.Q4_0
    assert p.decide("w/embed.weight", (8, 64), "F32").ggml_type == T.F16
    assert p.decide("w/conv.weight", (8, 64, 3), "F32").ggml_type == T.F16


def test_keep_type_precedence_spec_then_command_line() -> None:
    # The spec keeps codec/* at f32; --keep-type wins over it, and the last matching rule wins.
    p = policy("q8_0", "codec/*=q8_0", "codec/fc.*=f16")
    d = p.decide("codec/fc.weight", (32, 64), "F32")
    assert d.ggml_type == T.F16 and d.rule is not None and d.rule.origin == "--keep-type"
    d = p.decide("codec/proj.weight", (32, 64), "F32")
    assert d.ggml_type == T.Q8_0 and d.rule.pattern == "codec/*"
    d = p.decide("codec/bias", (32,), "F32")
    assert d.ggml_type == T.F32  # 1-D stays F32 whatever is requested
    d = policy("q8_0").decide("codec/proj.weight", (32, 64), "F32")
    assert d.ggml_type == T.F32 and d.rule.origin == "spec"


def test_keep_type_never_block_quantizes_what_the_policy_protects() -> None:
    p = policy("f16", "w/*=q8_0")
    assert p.decide("w/embed.weight", (50, 64), "F32").ggml_type == T.F16  # lookup table
    assert p.decide("w/conv.weight", (8, 4, 3), "F32").ggml_type == T.F16  # conv
    assert p.decide("w/a.weight", (8, 64), "F32").ggml_type == T.Q8_0
    p = policy("f32", "w/*=q4_0")
    assert p.decide("w/odd.weight", (8, 48), "F32").ggml_type == T.F16


def test_unused_command_line_rules_are_reported() -> None:
    p = policy("q8_0", "codec/*=f16", "nope/*=f32")
    assert [r.pattern for r in p.unused_cli_rules(["w/a", "codec/b"])] == ["nope/*"]


@pytest.mark.parametrize("text", ["q4_k", "Q6_K", "q5_k_m", "iq4_xs"])
def test_k_quants_are_not_offered(text: str) -> None:
    with pytest.raises(UsageError, match="K-quants") as info:
        parse_weight_type(text)
    assert "f32, f16, bf16, q8_0, q4_0" in (info.value.hint or "")


@pytest.mark.parametrize("text", ["f8", "int4", ""])
def test_unknown_type(text: str) -> None:
    with pytest.raises(UsageError, match="unknown --type"):
        parse_weight_type(text)


def test_parse_keep_type() -> None:
    assert parse_keep_type(" codec/* = F16 ") == KeepRule("codec/*", T.F16, "--keep-type")
    for bad in ("codec/*", "=f16", "codec/*=q4_k", "codec/*=x"):
        with pytest.raises(UsageError):
            parse_keep_type(bad)


def test_unknown_source_dtype_is_refused() -> None:
    with pytest.raises(UsageError, match="complex64"):
        policy("f32").decide("w/z", (2, 2), "complex64")
