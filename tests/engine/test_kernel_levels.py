"""Kernels per ISA level: AUDIOCPP_CPU_ISA holds the variant a process runs, compute_dtype=auto
follows the level's bfloat16, and the torch-bound kernels of the level this process runs and of
AVX2 (the laptop level) give the same bits as each other and as their portable code. (Every
level's torch-free core, ARM's included, is checked by tests/kernels.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from audiocpp.engine import device as dev
from audiocpp.engine.errors import UsageError
from audiocpp.engine.nn.kernels import cpu_isa, jit, rng, snake_kernel
from audiocpp.engine.nn.linear import bf16_linear, q8_0_linear

X86 = cpu_isa.arch() == "x86_64"
#: The levels compared: the one this process runs and AVX2's, where this CPU has both.
LEVELS = sorted({cpu_isa.level(), "avx2"} if X86 and cpu_isa.cpu_has(cpu_isa.LEVEL_FLAGS["avx2"])
                else {cpu_isa.level()})
pytestmark = pytest.mark.skipif(jit.toolchain_missing() is not None, reason="no C++ toolchain")


def test_the_cap_holds_every_kernel_to_its_level(monkeypatch: pytest.MonkeyPatch) -> None:
    if not X86 or not cpu_isa.cpu_has(cpu_isa.LEVEL_FLAGS["avx2"]):
        pytest.skip("an x86 CPU with AVX2")
    monkeypatch.setenv(cpu_isa.CAP_ENV, "avx2")
    assert cpu_isa.level() == "avx2" and not cpu_isa.native_bf16()
    for module in (q8_0_linear, bf16_linear, snake_kernel, rng):
        variant, why = module.KERNEL.select()
        assert variant.level == "avx2", module.KERNEL.name
        if cpu_isa.host_level() != "avx2":
            assert "AUDIOCPP_CPU_ISA=avx2" in why
    monkeypatch.setenv(cpu_isa.CAP_ENV, "generic")
    assert q8_0_linear.KERNEL.select()[0] is jit.GENERIC and cpu_isa.level() == "generic"
    monkeypatch.setenv(cpu_isa.CAP_ENV, "pentium")
    with pytest.raises(UsageError, match="AUDIOCPP_CPU_ISA='pentium'") as err:
        cpu_isa.level()
    assert "avx2" in err.value.hint


def test_auto_computes_in_bfloat16_only_where_the_cpu_has_it(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = torch.device("cpu")
    monkeypatch.setattr(cpu_isa, "native_bf16", lambda: False)
    assert dev.default_compute_mode(cpu, "Q8_0") == dev.ComputeMode(torch.float32, True)
    assert dev.default_compute_mode(cpu, "Q4_0").name == "float32-stored"
    assert dev.default_compute_mode(cpu, "BF16") == dev.ComputeMode(torch.float32, False)
    assert dev.default_compute_mode(cpu, "F32") == dev.ComputeMode(torch.float32, False)
    monkeypatch.setattr(cpu_isa, "native_bf16", lambda: True)
    assert dev.default_compute_mode(cpu, "Q8_0") == dev.ComputeMode(torch.bfloat16, True)
    assert dev.default_compute_mode(cpu, "F16").name == "bfloat16"
    assert dev.default_compute_mode(cpu, "F32").name == "float32"
    # a family whose block kernels beat its bfloat16 path keeps quantized packages stored
    assert dev.default_compute_mode(cpu, "Q8_0", bf16_for_quantized=False).name == "float32-stored"
    assert dev.default_compute_mode(cpu, "BF16", bf16_for_quantized=False).name == "bfloat16"


def test_compute_mode_names() -> None:
    auto = dev.ComputeMode(torch.float32, True)
    assert dev.compute_mode(None, auto) is auto and dev.compute_mode("auto", auto) is auto
    assert dev.compute_mode("fp32") == dev.ComputeMode(torch.float32, False)
    assert dev.compute_mode("float32-stored").name == "float32-stored"
    assert dev.compute_mode("bf16") == dev.ComputeMode(torch.bfloat16, True)
    assert dev.compute_mode(torch.float16).name == "float16"
    assert dev.torch_dtype("fp32-stored") is torch.float32
    with pytest.raises(ValueError):
        dev.compute_mode("float64-stored")


def _raw_blocks(rows: int, cols: int, bits: int, seed: int) -> tuple[np.ndarray, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    values = torch.randint(-127, 128, (rows, cols), dtype=torch.int8, generator=gen) if bits == 8 else \
        torch.randint(-8, 8, (rows, cols), dtype=torch.int8, generator=gen)
    scales = (torch.rand(rows, cols // 32, generator=gen) * 0.01 + 1e-4).to(torch.float16).float()
    return q8_0_linear.raw_blocks(values, scales, bits), values, scales


@pytest.mark.parametrize("bits", [8, 4])
def test_q8_0_levels_give_the_portable_bits(bits: int) -> None:
    ops = {level: q8_0_linear.kernel_at(level) for level in LEVELS}
    kernel = q8_0_linear.KERNEL
    assert all(ops.values()), {level: jit.why_not(kernel, kernel.variant(level)) for level in ops}
    gen = torch.Generator().manual_seed(bits)
    shapes = ((1, 5, 3), (3, 1, 2), (4, 4, 1), (5, 3, 4), (7, 2, 3), (9, 6, 2), (70, 3, 3))
    for rows, groups, blocks in shapes:
        raw, values, scales = _raw_blocks(groups * 16, blocks * 32, bits, rows)
        x = torch.randn(rows, blocks * 32, generator=gen) * torch.logspace(-3, 2, blocks * 32)
        x[0, :32] = 0  # a zero block
        outputs = []
        for level, op in ops.items():
            packed, packed_scales = q8_0_linear._pack_raw(op, raw, groups * 16, blocks * 32, bits)
            y = op.block_linear(x, packed, packed_scales)
            assert torch.equal(y, op.block_linear_portable(x, packed, packed_scales)), (level, rows, groups)
            outputs.append(y)
        assert all(torch.equal(outputs[0], y) for y in outputs[1:]), (rows, groups, blocks)
        reference = q8_0_linear.reference(x, values, scales)
        assert torch.allclose(outputs[0].double(), reference, rtol=1e-5, atol=1e-6)


def test_bf16_linear_levels_give_the_portable_bits() -> None:
    modules = [bf16_linear.kernel_at(level) for level in LEVELS]
    gen = torch.Generator().manual_seed(1)
    for rows, out, inputs in ((1, 9, 16), (2, 4, 45), (5, 7, 300), (9, 3, 1024)):
        x = torch.randn(rows, inputs, generator=gen)
        w = torch.randn(out, inputs, generator=gen).to(torch.bfloat16)
        bias = torch.randn(out, generator=gen)
        outputs = [m.linear_bf16w(x, w, bias) for m in modules]
        assert all(torch.equal(outputs[0], y) for y in outputs[1:])
        assert torch.equal(outputs[0], modules[0].linear_bf16w_portable(x, w, bias))


def test_snake_and_mt19937_levels_agree() -> None:
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(97, 37, generator=gen) * 30
    alpha = torch.rand(37, generator=gen) + 0.05
    inverse = (alpha + 1e-9).reciprocal()
    want = snake_kernel.snake_passes(x, alpha)
    for level in LEVELS:
        module = snake_kernel.kernel_at(level)
        assert torch.equal(module.snake_channels_last(x, alpha, inverse, False), want), level
        draws = rng.kernel_at(level).uniform_at(torch.Generator().manual_seed(3).get_state(), 20000,
                                               torch.arange(0, 20000, 7))[0]
        assert torch.equal(draws, torch.rand(20000, generator=torch.Generator().manual_seed(3))[::7]), level


def test_a_process_held_to_a_level_runs_it() -> None:
    """Under ``cpu_isa.LEVEL_ENV[level]`` (tests/engine/test_isa_level_suites.py runs suites so) our
    kernels and torch's run that level; unheld, the CPU's best."""
    import os

    held = os.environ.get(cpu_isa.CAP_ENV)
    if not held:
        assert cpu_isa.level() == cpu_isa.host_level()
        return
    assert cpu_isa.level() == held
    assert q8_0_linear.kernel() is not None and q8_0_linear.kernel().variant() in (held, f"{held}_vnni")
    if held == "avx2":
        assert torch.backends.cpu.get_cpu_capability() == "AVX2" and not cpu_isa.native_bf16()
