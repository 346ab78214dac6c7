"""engine.nn.linear.choice: the one function that picks a linear layer (linear_for) follows its table for
every storage, device and kernel; the walkers built on it (quantize_linears, fast_linears) give the
layers and numbers of those built by hand, bit for bit; keep_quantized adds the many-row layers only
where the Q8_0 kernel runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from audiocpp.engine.nn.linear import bf16_linear, packed_linear, q8_0_linear, quantized
from audiocpp.engine.nn.linear import choice as linear
from audiocpp.engine.weights import open_weights
from tests.engine.weights_builders import write_gguf

CPU = torch.device("cpu")
has_q8_0_kernel = pytest.mark.skipif(q8_0_linear.kernel() is None, reason="no Q8_0 kernel here")
has_bf16_kernel = pytest.mark.skipif(bf16_linear.kernel() is None, reason="no bf16-weight kernel here")
can_pack = pytest.mark.skipif(not packed_linear.packing_available(torch.float32), reason="no oneDNN packing")


def _source(tmp_path: Path, qtype: str = "Q8_0", rows: int = 64, cols: int = 64, name: str = "w"):
    w = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    return open_weights(write_gguf(tmp_path / f"{name}.gguf", {f"{name}.weight": w},
                                   types={f"{name}.weight": qtype} if qtype != "F32" else None))


def _bf16_valued(n: int = 64, k: int = 64, *, bias: bool = True, seed: int = 0) -> nn.Linear:
    torch.manual_seed(seed)
    lin = nn.Linear(k, n, bias=bias)
    lin.weight.data = lin.weight.data.to(torch.bfloat16).float()
    return lin


@has_q8_0_kernel
@pytest.mark.parametrize("qtype,bits", [("Q8_0", 8), ("Q4_0", 4)])
def test_blocks_on_the_cpu_take_the_q8_0_kernel_with_the_bias(tmp_path: Path, qtype: str, bits: int) -> None:
    blocks = _source(tmp_path, qtype).blocks("w.weight")
    with torch.device("meta"):
        meta = nn.Linear(64, 64)
    layer = linear.linear_for(meta, blocks=blocks, device=CPU, dtype=torch.bfloat16)
    assert isinstance(layer, q8_0_linear.Q8_0Linear) and layer.bits == bits
    assert isinstance(layer.bias, nn.Parameter) and layer.bias.device.type == "meta"  # loaded by name later


def test_blocks_without_the_kernel_take_int4_or_int8(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(q8_0_linear, "kernel", lambda: None)
    meta = nn.Linear(64, 64, bias=False, device="meta")
    q4 = linear.linear_for(meta, blocks=_source(tmp_path, "Q4_0").blocks("w.weight"), device=CPU)
    assert isinstance(q4, quantized.Int4Linear if quantized.int4pack_available() else quantized.Int8Linear)
    q8 = linear.linear_for(meta, blocks=_source(tmp_path, "Q8_0", name="v").blocks("v.weight"), device=CPU)
    assert isinstance(q8, quantized.Int8Linear) and q8.scale.dtype == torch.bfloat16


def test_blocks_off_the_cpu_take_int8(tmp_path: Path) -> None:
    meta = nn.Linear(64, 64, bias=False, device="meta")
    layer = linear.linear_for(meta, blocks=_source(tmp_path).blocks("w.weight"), device="meta",
                              dtype=torch.float16)
    assert isinstance(layer, quantized.Int8Linear) and layer.qweight.device.type == "meta"
    assert layer.scale.dtype == torch.float16


@has_bf16_kernel
@can_pack
def test_float_layers_follow_the_table() -> None:
    exact, other = _bf16_valued(), nn.Linear(64, 64)
    assert isinstance(linear.linear_for(exact, bf16_weights=True), bf16_linear.BF16WeightLinear)
    assert isinstance(linear.linear_for(exact, packed=True, bf16_weights=True), bf16_linear.BF16WeightLinear)
    assert isinstance(linear.linear_for(exact, packed=True), packed_linear.PackedLinear)
    assert isinstance(linear.linear_for(other, packed=True, bf16_weights=True), packed_linear.PackedLinear)
    assert linear.linear_for(other, bf16_weights=True) is other
    assert linear.linear_for(exact) is exact
    half = nn.Linear(64, 64).to(torch.bfloat16)
    if packed_linear.packing_available(torch.bfloat16):  # oneDNN packs bfloat16 only with bfloat16 units
        assert isinstance(linear.linear_for(half, packed=True, bf16_weights=True), packed_linear.PackedLinear)
    else:
        assert linear.linear_for(half, packed=True, bf16_weights=True) is half
    off_cpu = nn.Linear(64, 64, device="meta")
    assert linear.linear_for(off_cpu, packed=True, bf16_weights=True) is off_cpu


@has_bf16_kernel
@can_pack
def test_fast_linears_gives_the_layers_and_numbers_of_convert_then_pack() -> None:
    def model() -> nn.Module:
        torch.manual_seed(1)
        net = nn.Sequential(nn.Linear(32, 48), nn.Sequential(nn.Linear(48, 48), nn.GELU()), nn.Linear(48, 16))
        net[0].weight.data = net[0].weight.data.to(torch.bfloat16).float()
        net[2].weight.data = net[2].weight.data.to(torch.bfloat16).float()
        return net.eval()

    x = torch.randn(5, 32, generator=torch.Generator().manual_seed(2))
    by_hand = model()
    by_hand[0] = bf16_linear.BF16WeightLinear(by_hand[0], bf16_linear.kernel())
    by_hand[2] = bf16_linear.BF16WeightLinear(by_hand[2], bf16_linear.kernel())
    by_hand[1][0] = packed_linear.PackedLinear(by_hand[1][0])
    chosen = model()
    assert linear.fast_linears(chosen, packed=True, bf16_weights=True) == 3
    assert [type(m) for m in chosen.modules()] == [type(m) for m in by_hand.modules()]
    with torch.no_grad():
        assert torch.equal(chosen(x), by_hand(x))


def test_quantize_linears_replaces_matching_layers_only(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    tensors = {"a.weight": rng.standard_normal((64, 64)).astype(np.float32),
               "a.bias": rng.standard_normal(64).astype(np.float32),
               "b.weight": rng.standard_normal((64, 64)).astype(np.float32)}
    source = open_weights(write_gguf(tmp_path / "m.gguf", tensors,
                                     types={"a.weight": "Q8_0", "b.weight": "Q8_0"}))
    with torch.device("meta"):
        net = nn.Module()
        net.a, net.b = nn.Linear(64, 64), nn.Linear(64, 64, bias=False)
    done = linear.quantize_linears(net, source, ("a",), dtype=torch.bfloat16)
    assert (done == ["a.weight"] and isinstance(net.a, quantized.QUANTIZED_LAYERS)
            and isinstance(net.b, nn.Linear))
    same = linear.block_linear(source.blocks("a.weight"), CPU, torch.bfloat16)
    assert type(same) is type(net.a)
    x = torch.randn(3, 64).to(torch.bfloat16)
    net.a.bias = None
    assert torch.equal(net.a(x), same(x))


def test_keep_quantized_adds_the_many_row_layers_where_the_kernel_runs(tmp_path: Path) -> None:
    q8, f32 = _source(tmp_path, "Q8_0"), _source(tmp_path, "F32", name="f")
    always, many = ("lm.*",), ("dit.*",)
    kernel = q8_0_linear.kernel() is not None
    for device in (CPU, "cpu"):
        assert linear.keep_quantized(q8, True, device, always=always, many_rows=many) == \
            (always + many if kernel else always)
    assert linear.keep_quantized(q8, False, CPU, always=always, many_rows=many) == ()  # the exact mode
    assert linear.keep_quantized(f32, True, CPU, always=always, many_rows=many) == always
    assert linear.keep_quantized(q8, True, "meta", always=always, many_rows=many) == always
    assert linear.keep_quantized(q8, True, CPU, always=always) == always
