#!/usr/bin/env python3
"""Benchmarks: ours against upstream in the same run, printed as ratios.

Usage: ``python tools/bench.py <family> [options]``. Each family's benchmark is
``tools/<family>/bench.py`` and exposes ``main(argv) -> int``. Benchmarks are not tests:
they print wall time, RTF, time to first audio and peak RSS, and the ours/upstream ratio
measured in the same run.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))


def available() -> list[str]:
    return sorted(p.parent.name for p in HERE.glob("*/bench.py"))


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
    module = importlib.import_module(f"tools.{family}.bench")
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
