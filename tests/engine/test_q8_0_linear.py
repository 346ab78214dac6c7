"""engine.nn.linear.q8_0_linear: the VNNI kernel keeps a Q8_0 / Q4_0 matrix's own values and block scales
and computes exactly what its float64 reference computes from the same block-quantized rows; the
layer is chosen on a CPU that builds it, torch's int4 kernel or the per-row int8 layer elsewhere."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from audiocpp.engine.nn.kernels import jit
from audiocpp.engine.nn.linear import q8_0_linear as q8
from audiocpp.engine.nn.linear import quantized as qnn
from audiocpp.engine.nn.linear.choice import block_linear
from audiocpp.engine.weights import open_weights
from audiocpp.engine.weights.blocks import BlockTensor
from tests.engine.weights_builders import write_gguf

#: Skipped only where the kernel cannot be here (a CPU without its instruction sets, no compiler) or
#: is turned off (AUDIOCPP_Q8_0_KERNEL=0); a build failing anywhere else fails these tests, with why.
pytestmark = pytest.mark.skipif(
    q8.KERNEL.off() or (q8.KERNEL.unsupported() or jit.toolchain_missing()) is not None,
    reason="no AVX512-VNNI CPU or no compiler here")


def test_the_kernel_builds_here() -> None:
    assert q8.kernel() is not None, jit.why_not(q8.KERNEL)


def _blocks(rows: int, cols: int, qtype: str = "Q8_0", seed: int = 0) -> BlockTensor:
    import gguf

    w = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32) * 0.05
    data = gguf.quants.quantize(w, getattr(gguf.GGMLQuantizationType, qtype))
    return BlockTensor(qtype, (rows, cols), np.ascontiguousarray(data).reshape(-1).view(np.uint8))


def _values_scales(blocks: BlockTensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(blocks.values()), torch.from_numpy(blocks.scales())


@pytest.mark.parametrize("qtype", ["Q8_0", "Q4_0"])
@pytest.mark.parametrize("rows", [48, 45])
def test_the_layer_holds_the_stored_values_and_scales(qtype: str, rows: int) -> None:
    blocks = _blocks(rows, 256, qtype)
    layer = q8.Q8_0Linear.from_blocks(blocks)
    assert torch.equal(layer.values(), torch.from_numpy(blocks.values()))
    assert torch.equal(layer.dequantized(), blocks.dequantize())
    stored = 34 if qtype == "Q8_0" else 18  # bytes per 32 weights, as in the file; the last group padded
    assert layer.packed.numel() + layer.scales.numel() * 2 == 48 * 256 // 32 * stored
    same = q8.Q8_0Linear.from_values(*_values_scales(blocks), bits=8 if qtype == "Q8_0" else 4)
    assert torch.equal(same.packed, layer.packed) and torch.equal(same.scales, layer.scales)
    x = torch.randn(3, 256)
    assert layer(x).shape == (3, rows) and torch.equal(layer(x), same(x))


@pytest.mark.parametrize("qtype", ["Q8_0", "Q4_0"])
@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 63, 64, 65, 130])
@pytest.mark.parametrize("out_features", [16, 32, 48, 80, 112, 8, 40, 99])
def test_rows_match_the_float64_reference(rows: int, out_features: int, qtype: str) -> None:
    blocks = _blocks(out_features, 96, qtype, seed=rows)
    layer = q8.Q8_0Linear.from_blocks(blocks)
    x = torch.randn(rows, 96, generator=torch.Generator().manual_seed(rows))
    expected = q8.reference(x, *_values_scales(blocks))
    assert torch.allclose(layer(x).double(), expected, rtol=1e-5, atol=1e-6)


def test_dtype_leading_dims_bias_and_empty_input() -> None:
    blocks = _blocks(64, 128)
    layer = q8.Q8_0Linear.from_blocks(blocks)
    layer.bias = torch.nn.Parameter(torch.randn(64).to(torch.bfloat16), requires_grad=False)
    x = torch.randn(2, 3, 128).to(torch.bfloat16)
    y = layer(x)
    assert y.shape == (2, 3, 64) and y.dtype == torch.bfloat16
    expected = q8.reference(x.reshape(6, 128).float(), *_values_scales(blocks)) + layer.bias.double()
    assert torch.allclose(y.reshape(6, 64).double(), expected, rtol=1e-2, atol=1e-2)
    assert layer(torch.zeros(0, 128)).shape == (0, 64)
    zeros = layer(torch.zeros(3, 128))
    assert torch.equal(zeros, layer.bias.expand(3, 64).float())  # an all-zero block quantizes to zero


def test_non_finite_inputs_give_nan_outputs_not_numbers() -> None:
    layer = q8.Q8_0Linear.from_blocks(_blocks(32, 96))
    x = torch.randn(4, 96)
    x[1, 40], x[2, 5] = float("nan"), float("inf")
    y = layer(x)
    assert torch.isfinite(y[[0, 3]]).all() and torch.isnan(y[[1, 2]]).all()


def test_blocks_of_the_input_keep_outlier_channels_to_themselves() -> None:
    blocks = _blocks(256, 1024, seed=3)
    layer = q8.Q8_0Linear.from_blocks(blocks)
    w = blocks.dequantize().double()
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(16, 1024, generator=gen)
    x[:, torch.randperm(1024, generator=gen)[:10]] *= 20
    exact = x.double() @ w.t()
    rel = float((layer(x).double() - exact).norm() / exact.norm())
    step = x.abs().amax(1, keepdim=True) / 127  # the same rows quantized with one scale per row
    per_row = float(((torch.round(x / step) * step).double() @ w.t() - exact).norm() / exact.norm())
    assert rel < 0.015 and per_row > 3 * rel, (rel, per_row)


def test_cpu_quantized_linears_take_the_kernel_and_fall_back_without_it(monkeypatch, tmp_path: Path) -> None:
    cpu = torch.device("cpu")
    for qtype in ("Q8_0", "Q4_0"):
        layer = block_linear(_blocks(32, 64, qtype), cpu, torch.bfloat16)
        assert isinstance(layer, q8.Q8_0Linear) and layer.bits == (8 if qtype == "Q8_0" else 4)
    odd = block_linear(_blocks(40, 64), cpu, torch.bfloat16)  # not in groups of 16: padded
    assert isinstance(odd, q8.Q8_0Linear) and odd.out_features == 40 and odd.packed.shape[0] == 3
    monkeypatch.setattr(q8, "kernel", lambda: None)
    assert isinstance(block_linear(_blocks(32, 64), cpu, torch.bfloat16), qnn.Int8Linear)
    if qnn.int4pack_available():
        assert isinstance(block_linear(_blocks(32, 64, "Q4_0"), cpu, torch.bfloat16), qnn.Int4Linear)


def test_a_q8_0_gguf_loads_into_the_kernel_layer(tmp_path: Path) -> None:
    w = np.random.default_rng(5).standard_normal((32, 64)).astype(np.float32)
    source = open_weights(write_gguf(tmp_path / "w.gguf", {"w": w}, types={"w": "Q8_0"}))
    layer = block_linear(source.blocks("w"), torch.device("cpu"), torch.bfloat16)
    assert isinstance(layer, q8.Q8_0Linear) and torch.equal(layer.dequantized(), source.get("w"))
    assert qnn.quantized_bytes(torch.nn.Sequential(layer)) == 32 * 64 // 32 * 34


def test_layers_sharing_an_input_run_as_one_call_with_the_same_bits() -> None:
    layers = [q8.Q8_0Linear.from_blocks(_blocks(n, 96, qtype, seed=n))
              for n, qtype in ((48, "Q8_0"), (16, "Q4_0"), (32, "Q8_0"))]
    layers[1].bias = torch.nn.Parameter(torch.randn(16), requires_grad=False)
    for rows in (1, 3, 70):
        x = torch.randn(2, rows, 96)
        shared = q8.Q8_0Linear.shared_input(layers, x)
        assert all(torch.equal(y, layer(x)) for y, layer in zip(shared, layers))
    assert q8.Q8_0Linear.shared_input(layers[:1], x) is None  # nothing to share
    assert q8.Q8_0Linear.shared_input([layers[0], torch.nn.Linear(96, 8)], x) is None
