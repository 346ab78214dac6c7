#!/usr/bin/env python3
"""Benchmarks: ours against upstream in the same run, printed as ratios.

Usage: ``python tools/bench.py <family> [--isa avx2,avx512] [options]``. Each family's benchmark is
``tools/<family>/bench.py`` and exposes ``main(argv) -> int``. Benchmarks are not tests:
they print wall time, RTF, time to first audio and peak RSS, and the ours/upstream ratio
measured in the same run.

``--isa LEVELS`` (``avx2``, ``avx_vnni``, ``avx512``, ``generic`` or ``all``: every level this CPU
has) runs the family's benchmark once per level, each in its own process under the environment
that makes this host compute as a CPU of that level (``engine.nn.kernels.cpu_isa.LEVEL_ENV``: the kernels'
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
from tools.bench_common import isa_levels, level_env  # noqa: E402


def available() -> list[str]:
    return sorted(p.parent.name for p in HERE.glob("*/bench.py"))


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
