"""engine.nn.kernels.rng: uniform_at gives torch.rand's values at the kept positions and leaves the
generator where torch.rand leaves it, for each dtype, across the MT19937 block boundaries."""

from __future__ import annotations

import pytest
import torch

from audiocpp.engine.nn.kernels import jit
from audiocpp.engine.nn.kernels.rng import KERNEL, can_draw, kernel, uniform_at

pytestmark = pytest.mark.skipif(
    KERNEL.off() or (KERNEL.unsupported() or jit.toolchain_missing()) is not None,
    reason="the MT19937 kernel cannot be built here (no AVX-512 or no compiler): draws stay on torch.rand")


def test_the_kernel_builds_here() -> None:
    assert kernel() is not None, jit.why_not(KERNEL)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("before,total", [(0, 1), (0, 624), (1, 623), (623, 2), (5, 155776), (1000, 4097)])
def test_values_and_state_are_torch_rand(dtype: torch.dtype, before: int, total: int) -> None:
    generator = torch.Generator().manual_seed(before * 7 + total)
    torch.rand(before, generator=generator)
    mirror = torch.Generator()
    mirror.set_state(generator.get_state())
    positions = torch.unique(torch.randint(0, total, (min(total, 3000),)))
    want = torch.rand(total, generator=generator, dtype=dtype)[positions]
    got = uniform_at(mirror, total, positions, dtype)
    assert got is not None and got.dtype == dtype and torch.equal(got, want)
    assert torch.equal(mirror.get_state(), generator.get_state())


def test_the_default_generator_and_no_positions() -> None:
    saved = torch.default_generator.get_state()
    try:
        torch.manual_seed(3)
        got = uniform_at(None, 5000, torch.tensor([0, 4999]), torch.float32)
        after = torch.rand(3)
        torch.manual_seed(3)
        want = torch.rand(5000)
        assert torch.equal(got, want[[0, 4999]]) and torch.equal(after, torch.rand(3))
        empty = uniform_at(None, 10, torch.zeros(0, dtype=torch.long), torch.float32)
        assert empty is not None and empty.numel() == 0
    finally:
        torch.default_generator.set_state(saved)


def test_what_it_does_not_draw() -> None:
    generator = torch.Generator().manual_seed(0)
    state = generator.get_state()
    assert not can_draw(generator, torch.float64)
    assert uniform_at(generator, 10, torch.tensor([1]), torch.float64) is None  # float64 takes two words
    assert torch.equal(generator.get_state(), state)
    with pytest.raises(RuntimeError, match="increase"):
        uniform_at(generator, 10, torch.tensor([3, 3]), torch.float32)
    with pytest.raises(RuntimeError, match="outside"):
        uniform_at(generator, 10, torch.tensor([10]), torch.float32)
