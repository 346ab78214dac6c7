"""engine.nn.kernels.int8_conv: a 1-D convolution over int8 weights, the input quantized per tensor at run
time. The kernel's sums equal the reference's exactly at every ISA level this CPU has (AVX2 splits weights
past ±64 into two exact dot products), and the layer stays close to the float convolution it replaces."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from audiocpp.engine.nn.kernels import cpu_isa, int8_conv, jit

pytestmark = pytest.mark.skipif(jit.toolchain_missing() is not None, reason="no C++ toolchain")


def case(seed: int, cin: int, cout: int, k: int, frames: int, span: int = 127):
    gen = torch.Generator().manual_seed(seed)
    w = torch.randint(-span, span + 1, (cout, cin, k), dtype=torch.int8, generator=gen)
    scale = torch.rand(cout, generator=gen) * 0.004 + 1e-4
    bias = torch.randn(cout, generator=gen) * 0.1
    x = torch.randn(2, cin, frames, generator=gen) * torch.logspace(-1, 1, cin)[:, None]
    return x, w, scale, bias


def run(module, x, w, scale, bias, stride, pad, dil):
    sums = w.to(torch.int32).sum((1, 2)).to(torch.int32)
    cout, k = w.shape[0], w.shape[2]
    return module.conv1d(x, *module.pack_weights(w), sums, scale, bias, cout, k, stride, pad, dil)


@pytest.mark.parametrize("shape", [(7, 19, 3, 1, 1, 1, 33), (64, 48, 11, 1, 15, 3, 200),
                                   (22, 16, 12, 6, 3, 1, 61), (5, 3, 1, 1, 0, 1, 9)],
                         ids=["odd", "dilated", "strided", "pointwise"])
def test_the_kernel_computes_the_reference(shape) -> None:
    cin, cout, k, stride, pad, dil, frames = shape
    module = int8_conv.kernel()
    assert module is not None, jit.why_not(int8_conv.KERNEL)
    x, w, scale, bias = case(1, cin, cout, k, frames)
    got = run(module, x, w, scale, bias, stride, pad, dil)
    want = int8_conv.reference(x, w, scale, bias, stride, pad, dil)
    assert got.shape == want.shape
    assert torch.allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("outliers", [False, True], ids=["dense-rest", "sparse-rest"])
def test_every_level_gives_the_portable_bits(outliers: bool) -> None:
    """Weights past ±64 everywhere (AVX2 adds a dense second product) or in a few places (a sparse one)."""
    levels = ["generic"]
    if cpu_isa.arch() == "x86_64":
        levels += [lv for lv in ("avx2", "avx_vnni", "avx512") if cpu_isa.cpu_has(cpu_isa.LEVEL_FLAGS[lv])]
    x, w, scale, bias = case(2, 36, 40, 7, 301, span=64 if outliers else 127)
    if outliers:
        w[3, 5, 2], w[17, 30, 0], w[39, 0, 6] = 127, -128, 90
    outputs = {}
    for level in levels:
        module = int8_conv.kernel_at(level)
        assert module is not None, (level, jit.why_not(int8_conv.KERNEL))
        outputs[level] = run(module, x * 40, w, scale, bias, 1, 9, 3)
    assert all(torch.equal(outputs["generic"], y) for y in outputs.values()), list(outputs)


def test_the_layer_is_close_to_the_float_convolution() -> None:
    x, w, scale, bias = case(3, 32, 32, 5, 500, span=90)
    conv = torch.nn.Conv1d(32, 32, 5, padding=4, dilation=2)
    with torch.no_grad():
        conv.weight.copy_(w.float() * scale[:, None, None])
        conv.bias.copy_(bias)
    layer = int8_conv.int8_conv(conv, w, scale)
    assert layer is not None
    with torch.inference_mode():
        cos = F.cosine_similarity(layer(x).flatten(), conv(x).flatten(), 0)
    assert float(cos) > 0.9995


def test_switch_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUDIOCPP_INT8_CONV", "0")
    assert jit.build(int8_conv.KERNEL) is None
