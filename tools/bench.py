#!/usr/bin/env python3
"""Benchmarks: ours against upstream in the same run, printed as ratios.

Usage: ``python tools/bench.py <family> [options]``. Each family's benchmark lives in
``tools/bench_<family>.py`` and exposes ``main(argv) -> int``. Benchmarks are not tests:
they print wall time, RTF, time to first audio and peak RSS, and the ours/upstream ratio
measured in the same run.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def available() -> list[str]:
    return sorted(p.stem[len("bench_"):] for p in HERE.glob("bench_*.py"))


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        print("families with a benchmark:", ", ".join(available()) or "none")
        return 0 if argv else 2
    family, rest = argv[0], argv[1:]
    path = HERE / f"bench_{family}.py"
    if not path.exists():
        print(f"error: no benchmark for {family!r}; available: {', '.join(available()) or 'none'}", file=sys.stderr)
        return 2
    spec = importlib.util.spec_from_file_location(f"bench_{family}", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
