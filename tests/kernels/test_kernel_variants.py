"""The C++ kernels' own test (kernel_variants.cpp), built once per ISA level and run: natively for
every x86 level this CPU has (whatever AUDIOCPP_CPU_ISA says), and for AArch64 (NEON, NEON with
dotprod, portable) with Debian's cross compiler under qemu-aarch64, so the ARM variants are checked
on any machine. Each run checks every kernel's vector code against its portable code bit for bit,
and the portable code against double-precision arithmetic (and std::mt19937)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from audiocpp.engine.nn.kernels import cpu_isa, jit
from audiocpp.engine.nn.linear import q8_0_linear

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "kernel_variants.cpp"
CROSS = "aarch64-linux-gnu-g++"
QEMU = "qemu-aarch64"
#: What the compiled test must report for each level (the code paths isa.h enables).
COMPILED = {"generic": "generic", "avx2": "avx2", "avx_vnni": "avx_vnni", "avx512": "avx512_vnni",
            "neon": "neon", "neon_dotprod": "neon_dotprod"}


def _flags(variant: jit.Variant) -> list[str]:
    return [option for _, option in variant.isa if option] + list(variant.options)


def _build(compiler: str, variant: jit.Variant, out: Path, *extra: str) -> None:
    cmd = [compiler, "-O2", "-std=c++17", "-ffp-contract=off", *_flags(variant), *extra,
           "-I", str(jit.KERNELS_DIR), str(SOURCE), "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr[-3000:]}"


def _check(cmd: list[str], level: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    words = proc.stdout.split()
    assert words[:2] == ["ok", COMPILED[level]] and int(words[2]) > 100_000, proc.stdout


X86 = [v for v in q8_0_linear.KERNEL.variants if v.level in ("generic", "avx2", "avx_vnni", "avx512")]


@pytest.mark.skipif(cpu_isa.arch() != "x86_64" or shutil.which("g++") is None,
                    reason="an x86-64 C++ compiler")
@pytest.mark.parametrize("variant", X86, ids=[v.level for v in X86])
def test_every_x86_level_this_cpu_runs_equals_the_portable_code(variant: jit.Variant, tmp_path: Path) -> None:
    if variant.missing():
        pytest.skip(f"this CPU lacks {', '.join(variant.missing())}")
    binary = tmp_path / "kernel_variants"
    _build("g++", variant, binary)
    _check([str(binary)], variant.level)


ARM = [v for v in q8_0_linear.KERNEL.variants if v.level in ("neon", "neon_dotprod")] + [jit.GENERIC]


@pytest.fixture(scope="module")
def cross_tools() -> None:
    missing = [tool for tool in (CROSS, QEMU) if shutil.which(tool) is None]
    if missing:
        message = (f"{' and '.join(missing)} missing: run tools/setup_system.sh (bin/test does; Debian's "
                   "g++-aarch64-linux-gnu and qemu-user)")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.mark.parametrize("variant", ARM, ids=[v.level for v in ARM])
def test_every_arm_level_equals_the_portable_code_under_qemu(variant: jit.Variant, tmp_path: Path,
                                                            cross_tools: None) -> None:
    binary = tmp_path / "kernel_variants-aarch64"
    extra = ["-march=armv8-a"] if variant.level != "neon_dotprod" else []
    _build(CROSS, variant, binary, "-static", *extra)
    _check([QEMU, "-cpu", "max", str(binary)], variant.level)
