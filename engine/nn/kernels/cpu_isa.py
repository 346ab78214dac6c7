"""The CPU's instruction sets as the kernels see them: its feature flags, the ISA levels a kernel
is compiled for, the level ``AUDIOCPP_CPU_ISA`` holds a process to, and whether the CPU computes
in bfloat16 natively (what ``compute_dtype=auto`` asks).

Levels, lowest first (a kernel runs the highest level that this CPU has and the cap allows):

- x86-64: ``generic`` (portable C++), ``avx2`` (AVX2 + FMA + F16C: every x86-64 CPU since 2013),
  ``avx_vnni`` (256-bit VNNI of Intel's consumer cores), ``avx512`` (AVX-512 F/BW/VL, with VNNI,
  BF16 and AMX where the CPU has them);
- AArch64: ``generic``, ``neon`` (Advanced SIMD, in every AArch64 CPU), ``neon_dotprod`` (ARMv8.2
  ``sdot``).

``AUDIOCPP_CPU_ISA=avx2`` (or any level of this CPU's architecture) holds every kernel at or
below that level and makes ``compute_dtype=auto`` answer as such a CPU would, so that an AVX-512
host reproduces an AVX2 laptop with::

    AUDIOCPP_CPU_ISA=avx2 ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2

(the last three hold torch's own kernels, oneDNN and MKL to AVX2; they must be set before torch
loads). A level above the CPU's cannot be forced: kernels then run the CPU's best.
"""

from __future__ import annotations

import os
import platform
import subprocess
from functools import cache
from pathlib import Path

from ...errors import UsageError

#: The environment variable that holds the kernels (and ``compute_dtype=auto``) to a lower level.
CAP_ENV = "AUDIOCPP_CPU_ISA"
#: The environment that makes a host compute as a CPU of each x86 level: the kernels' cap and what
#: holds torch's own kernels, oneDNN and MKL there (read when torch loads: set it before). An AVX-512
#: host with ``LEVEL_ENV["avx2"]`` reproduces an AVX2 laptop (docs/performance.md).
LEVEL_ENV = {
    "generic": {CAP_ENV: "generic", "ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41",
                "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"},
    "avx2": {CAP_ENV: "avx2", "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
             "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "avx_vnni": {CAP_ENV: "avx_vnni", "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2_VNNI",
                 "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "avx512": {CAP_ENV: "avx512"},
}

#: ISA levels per architecture, lowest first.
LEVELS = {
    "x86_64": ("generic", "avx2", "avx_vnni", "avx512"),
    "aarch64": ("generic", "neon", "neon_dotprod"),
}
#: The CPU flags (as Linux names them) each level needs, beyond the levels below it.
LEVEL_FLAGS = {
    "generic": (),
    "avx2": ("avx2", "fma", "f16c"),
    "avx_vnni": ("avx2", "fma", "f16c", "avx_vnni"),
    "avx512": ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl"),
    "neon": ("asimd",),
    "neon_dotprod": ("asimd", "asimddp"),
}
#: Flags that mean bfloat16 arithmetic in hardware (x86: AVX512-BF16, AMX-BF16; ARM: BF16).
BF16_FLAGS = {"x86_64": ("avx512_bf16", "amx_bf16"), "aarch64": ("bf16",)}
#: The level each bf16 flag comes with (a cap below it hides it).
_BF16_LEVEL = {"avx512_bf16": "avx512", "amx_bf16": "avx512", "bf16": "neon"}


def arch() -> str:
    """``x86_64``, ``aarch64`` or the machine's own name for anything else."""
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


@cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux names them (``avx2``, ``avx512_vnni``; ``asimd``,
    ``asimddp`` on ARM); from ``sysctl`` on macOS; empty where neither can be read."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    if platform.system() == "Darwin" and arch() == "aarch64":
        names = {"hw.optional.arm.FEAT_DotProd": "asimddp", "hw.optional.arm.FEAT_BF16": "bf16",
                 "hw.optional.arm.FEAT_I8MM": "i8mm"}
        found = {"asimd"}
        for key, flag in names.items():
            try:
                out = subprocess.run(["sysctl", "-n", key], capture_output=True, text=True, timeout=5)
                if out.stdout.strip() == "1":
                    found.add(flag)
            except (OSError, subprocess.SubprocessError):
                pass
        return frozenset(found)
    return frozenset()


def cpu_has(flags) -> bool:
    return set(flags) <= cpu_flags()


def levels() -> tuple[str, ...]:
    """The levels of this machine's architecture, lowest first (``generic`` alone elsewhere)."""
    return LEVELS.get(arch(), ("generic",))


def host_level() -> str:
    """The highest level this CPU has."""
    return [level for level in levels() if cpu_has(LEVEL_FLAGS[level])][-1]


def cap() -> str | None:
    """The level ``AUDIOCPP_CPU_ISA`` names (None when unset or ``auto``); an unknown name is a
    usage error that lists this architecture's levels."""
    value = os.environ.get(CAP_ENV, "").strip().lower()
    if value in ("", "auto", "native"):
        return None
    if value not in levels():
        raise UsageError(f"{CAP_ENV}={value!r} is not an ISA level of this {arch()} CPU",
                         hint=f"use one of: {', '.join(levels())} (or unset it)")
    return value


def rank(level: str) -> int:
    """A level's place in this architecture's order (-1 for another architecture's level)."""
    order = levels()
    return order.index(level) if level in order else -1


def allowed(level: str) -> bool:
    """Whether the cap lets a kernel run ``level`` (another architecture's levels never)."""
    limit = cap()
    return rank(level) >= 0 and (limit is None or rank(level) <= rank(limit))


def level() -> str:
    """The level the kernels run at: the highest one this CPU has that the cap allows."""
    return [name for name in levels() if allowed(name) and cpu_has(LEVEL_FLAGS[name])][-1]


def native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware at the level the process runs at (AVX512-BF16
    or AMX-BF16 with the ``avx512`` level, ARM's BF16): where it does not, torch emulates bfloat16
    GEMMs, hundreds of times slower than float32 (``compute_dtype=auto`` then picks float32)."""
    here = rank(level())
    return any(flag in cpu_flags() and here >= rank(_BF16_LEVEL[flag]) for flag in BF16_FLAGS.get(arch(), ()))


def describe() -> str:
    """One line: the CPU's best level, the cap, the level in use, bf16 in hardware or not."""
    limit = cap()
    held = f", held to {limit} by {CAP_ENV}" if limit is not None and rank(limit) < rank(host_level()) else ""
    return (f"{arch()} CPU, best level {host_level()}{held}: kernels at {level()}, bfloat16 "
            f"{'in hardware' if native_bf16() else 'emulated (compute_dtype=auto computes in float32)'}")
