"""engine.nn.kernels.snake_kernel: Snake in one pass gives torch's passes bit for bit (float32, and the
bfloat16 rounding), for partial vectors of channels, large magnitudes and several row tiles; the
decoder's Snake uses it and falls back to the passes where it does not apply."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from audiocpp.engine.nn.kernels import jit
from audiocpp.engine.nn.kernels.snake_kernel import KERNEL, kernel, snake_fused, snake_passes
from audiocpp.engine.nn.layers.dac import Snake1d, snake_channels_last

#: Skipped only where the kernel cannot be here (no AVX-512, no compiler) or is turned off
#: (AUDIOCPP_SNAKE_KERNEL=0); a build failing anywhere else fails these tests, with why.
pytestmark = pytest.mark.skipif(
    KERNEL.off() or (KERNEL.unsupported() or jit.toolchain_missing()) is not None,
    reason="the Snake kernel cannot be built here (no AVX-512 or no compiler): Snake stays on torch's passes")


def test_the_kernel_builds_here() -> None:
    assert kernel() is not None, jit.why_not(KERNEL)


@pytest.mark.parametrize("shape", [(1, 5, 1), (2, 700, 7), (1, 3000, 96), (1, 9, 1536), (4, 1, 33)])
@pytest.mark.parametrize("scale", [1e-3, 1.0, 40.0, 3e5])
def test_equals_torch_passes_bit_for_bit(shape: tuple[int, ...], scale: float) -> None:
    generator = torch.Generator().manual_seed(sum(shape))
    x = torch.randn(shape, generator=generator) * scale
    alpha = torch.rand(shape[-1], generator=generator) * 3 + 0.01
    want = snake_passes(x, alpha)
    got = snake_fused(x, alpha, None)
    assert got is not None and got.dtype == torch.float32 and torch.equal(got, want)
    got16 = snake_fused(x, alpha, torch.bfloat16)
    assert got16 is not None and got16.dtype == torch.bfloat16 and torch.equal(got16, want.to(torch.bfloat16))


def test_special_values_round_as_torch() -> None:
    x = torch.tensor([[0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-40, -3.4e38, 65504.0]])
    alpha = torch.full((8,), 0.7)
    want, got = snake_passes(x, alpha), snake_fused(x, alpha, torch.bfloat16)
    assert got is not None
    assert torch.equal(got.isnan(), want.to(torch.bfloat16).isnan())
    finite = ~want.isnan()
    assert torch.equal(got[finite], want.to(torch.bfloat16)[finite])


def test_not_applied_where_it_does_not_fit() -> None:
    alpha = torch.rand(8)
    assert snake_fused(torch.randn(8, 3).t(), alpha, None) is None  # not contiguous
    assert snake_fused(torch.randn(3, 8, dtype=torch.float64), alpha, None) is None
    assert snake_fused(torch.randn(3, 8), alpha, torch.float16) is None
    assert snake_fused(torch.randn(3, 9), alpha, None) is None  # channels disagree
    x = torch.randn(8, 3).t()  # the fallback still computes Snake
    assert torch.equal(snake_channels_last(x, alpha), snake_passes(x, alpha))


def test_snake_module_output_dtype() -> None:
    module = Snake1d(16)
    module.alpha.data = torch.rand(1, 16, 1) + 0.1
    x = torch.randn(2, 50, 16)
    with torch.inference_mode():
        assert torch.equal(module.forward_cl(x), snake_passes(x, module.alpha))
        module.out_dtype = torch.bfloat16
        out = module.forward_cl(x)
    assert out.dtype == torch.bfloat16 and torch.equal(out, snake_passes(x, module.alpha).to(torch.bfloat16))


def test_switch_turns_it_off() -> None:
    code = ("from audiocpp.engine.nn.kernels import jit, snake_kernel as s; import torch;"
            "print(s.kernel() is None, jit.why_not(s.KERNEL));"
            "print(s.snake_fused(torch.ones(2, 4), torch.ones(4), None))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**__import__("os").environ, "AUDIOCPP_SNAKE_KERNEL": "0"}).stdout.split("\n")
    assert out[0] == "True turned off (AUDIOCPP_SNAKE_KERNEL=0)" and out[1] == "None"
