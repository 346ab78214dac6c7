"""engine.nn.linear.bf16_linear: float32 math over bfloat16-stored weights equals F.linear up to
summation order, for decode and prefill shapes and odd sizes; only exactly-bf16 weights convert."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from audiocpp.engine.nn.kernels import jit
from audiocpp.engine.nn.linear.bf16_linear import KERNEL, BF16WeightLinear, exactly_bf16, kernel
from audiocpp.engine.nn.linear.choice import fast_linears

#: Skipped only where the kernel cannot be here (no AVX-512 in the CPU or torch, no compiler) or is
#: turned off (AUDIOCPP_BF16_LINEAR=0); a build failing anywhere else fails these tests, with why.
pytestmark = pytest.mark.skipif(
    KERNEL.off() or (KERNEL.unsupported() or jit.toolchain_missing()) is not None,
    reason="the bf16-weight kernel cannot be built here (no AVX-512 or no compiler): layers stay on torch's "
           "kernels")


def test_the_kernel_builds_here() -> None:
    assert kernel() is not None, jit.why_not(KERNEL)


@pytest.mark.parametrize("rows,n,k,bias", [(1, 64, 896, True), (3, 37, 100, False), (50, 130, 64, True),
                                           (1, 5, 15, False), (2000, 8, 32, True)])
def test_matches_float32_linear(rows: int, n: int, k: int, bias: bool) -> None:
    torch.manual_seed(rows + n)
    lin = nn.Linear(k, n, bias=bias)
    lin.weight.data = lin.weight.data.to(torch.bfloat16).float()
    x = torch.randn(2, rows, k)
    ref = F.linear(x, lin.weight, lin.bias)
    got = BF16WeightLinear(lin, kernel())(x)
    assert got.shape == ref.shape and got.dtype == torch.float32
    assert (got - ref).abs().max() <= 2e-6 * ref.abs().max()


def test_converts_only_exact_bfloat16_weights() -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.Sequential(nn.Linear(8, 4)), nn.Linear(4, 2))
    model[0].weight.data = model[0].weight.data.to(torch.bfloat16).float()
    model[1][0].weight.data = model[1][0].weight.data.to(torch.bfloat16).float()
    assert not exactly_bf16(model[2].weight)
    assert fast_linears(model, packed=False, bf16_weights=True) == 2
    assert isinstance(model[0], BF16WeightLinear) and isinstance(model[1][0], BF16WeightLinear)
    assert isinstance(model[2], nn.Linear)
