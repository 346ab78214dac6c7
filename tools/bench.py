#!/usr/bin/env python3
"""Benchmarks: ours against upstream in the same run, printed as ratios.

Usage: ``python tools/bench.py <family> [--isa avx2,avx512] [options]``. Each family's benchmark is
``tools/<family>/bench.py`` and exposes ``main(argv) -> int``. Benchmarks are not tests:
they print wall time, RTF, time to first audio and peak RSS, and the ours/upstream ratio
measured in the same run.

``--isa LEVELS`` (``avx2``, ``avx_vnni``, ``avx512``, ``generic`` or ``all``: every level this CPU
has) runs the family's benchmark once per level, each in its own process under the environment
that makes this host compute as a CPU of that level (``engine.nn.cpu_isa.LEVEL_ENV``: the kernels'
``AUDIOCPP_CPU_ISA`` and torch's, oneDNN's and MKL's own limits, for both sides), one after
another in one run, so an AVX-512 host measures an AVX2 laptop beside itself.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))


def available() -> list[str]:
    return sorted(p.parent.name for p in HERE.glob("*/bench.py"))


def isa_levels(value: str) -> list[str]:
    """The levels ``--isa`` names (``all``: every level of this CPU, best first)."""
    from audiocpp.engine.nn import cpu_isa

    have = [level for level in cpu_isa.levels() if cpu_isa.cpu_has(cpu_isa.LEVEL_FLAGS[level])]
    if value == "all":
        return list(reversed(have))
    levels = [v.strip() for v in value.split(",") if v.strip()]
    for level in levels:
        if level not in cpu_isa.levels():
            raise SystemExit(f"error: --isa {level!r} is not a level of this {cpu_isa.arch()} CPU "
                             f"(use {', '.join(cpu_isa.levels())} or all)")
        if level not in have:
            raise SystemExit(f"error: this CPU cannot run the {level} level (it has {', '.join(have)})")
    return levels


def level_env(level: str) -> dict[str, str]:
    from audiocpp.engine.nn import cpu_isa

    limits = ("AUDIOCPP_CPU_ISA", "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")
    env = {k: v for k, v in os.environ.items() if k not in limits}
    env.update(cpu_isa.LEVEL_ENV.get(level, {cpu_isa.CAP_ENV: level}))
    return env


def run_levels(family: str, levels: list[str], rest: list[str]) -> int:
    """The family's benchmark once per level, each in its own process, in order."""
    status = 0
    for level in levels:
        env = level_env(level)
        shown = " ".join(f"{k}={v}" for k, v in env.items() if k not in os.environ or os.environ[k] != v)
        print(f"\n######## ISA level {level}: {shown or '(this host as it is)'}", flush=True)
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), family, *rest], env=env)
        status = status or proc.returncode
    return status


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        print("families with a benchmark:", ", ".join(available()) or "none")
        return 0 if argv else 2
    family, rest = argv[0], argv[1:]
    if family not in available():
        print(f"error: no benchmark for {family!r}; available: {', '.join(available()) or 'none'}",
              file=sys.stderr)
        return 2
    if "--isa" in rest:
        at = rest.index("--isa")
        if at + 1 >= len(rest):
            print("error: --isa needs a value (avx2,avx512 or all)", file=sys.stderr)
            return 2
        levels, rest = isa_levels(rest[at + 1]), rest[:at] + rest[at + 2:]
        return run_levels(family, levels, rest)
    module = importlib.import_module(f"tools.{family}.bench")
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
