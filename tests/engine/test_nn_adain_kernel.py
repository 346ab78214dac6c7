"""engine.nn.kernels.adain_kernel: AdaIN + Snake / leaky ReLU in one pass gives the torch passes' numbers to
float rounding, and the same bits at the level this process runs as at AVX2 and in the portable build."""

from __future__ import annotations

import pytest
import torch

from audiocpp.engine.nn.kernels import adain_kernel, cpu_isa, jit

pytestmark = pytest.mark.skipif(jit.toolchain_missing() is not None, reason="no C++ toolchain")


def inputs(seed: int, batch: int, channels: int, frames: int):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, channels, frames, generator=gen) * torch.logspace(-1, 1, channels)[:, None] + 0.5
    w, b = torch.rand(channels, generator=gen) + 0.5, torch.randn(channels, generator=gen) * 0.1
    g, be = torch.randn(batch, channels, generator=gen) * 0.3, torch.randn(batch, channels, generator=gen)
    alpha = torch.rand(channels, generator=gen) * 8 + 0.05
    return x, w, b, g, be, alpha


@pytest.mark.parametrize("kind", [adain_kernel.SNAKE, adain_kernel.LEAKY], ids=["snake", "leaky"])
@pytest.mark.parametrize("shape", [(1, 7, 13), (2, 64, 4801), (1, 3, 2)], ids=["tiny", "wide", "two-frames"])
def test_kernel_is_the_torch_passes_to_float_rounding(kind: int, shape: tuple[int, int, int]) -> None:
    op = adain_kernel.kernel()
    assert op is not None, jit.why_not(adain_kernel.KERNEL)
    x, w, b, g, be, alpha = inputs(1, *shape)
    got = op(x, w, b, g, be, alpha, 1e-5, 0.2, kind)
    want = adain_kernel.adain_act_passes(x, w, b, g, be, alpha, 1e-5, 0.2, kind)
    scale = float(want.abs().max())
    # torch sums the statistics in float32, the kernel in double: a few ulps of the largest value apart
    assert float((got - want).abs().max()) <= 1e-5 * max(scale, 1.0)


def test_every_level_gives_the_portable_bits() -> None:
    levels = ["generic", cpu_isa.level()]
    if cpu_isa.arch() == "x86_64" and cpu_isa.cpu_has(cpu_isa.LEVEL_FLAGS["avx2"]):
        levels.append("avx2")
    x, w, b, g, be, alpha = inputs(2, 2, 19, 3001)
    x = x * 300  # arguments of the sine up to thousands
    for kind in (adain_kernel.SNAKE, adain_kernel.LEAKY):
        outputs = {level: adain_kernel.kernel_at(level).adain_act(x, w, b, g, be, alpha, 1e-5, 0.1, kind)
                   for level in dict.fromkeys(levels)}
        first = outputs["generic"]
        assert all(torch.equal(first, y) for y in outputs.values()), list(outputs)


def test_switch_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUDIOCPP_ADAIN_KERNEL", "0")
    assert jit.build(adain_kernel.KERNEL) is None
