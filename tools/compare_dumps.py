"""Compare two result dumps (``tests/result_dump.py``): which tests' arrays differ in any bit.

Usage: ``python -m tools.compare_dumps BEFORE_DIR AFTER_DIR`` -> one line per differing or missing
test, then the totals; exit 1 when anything differs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def compare(before: Path, after: Path) -> int:
    names = sorted({p.name for p in before.glob("*.npz")} | {p.name for p in after.glob("*.npz")})
    same = differ = 0
    for name in names:
        a, b = before / name, after / name
        if not a.exists() or not b.exists():
            print(f"missing in {'before' if not a.exists() else 'after'}: {name}")
            differ += 1
            continue
        x, y = np.load(a), np.load(b)
        bad = [k for k in sorted(set(x.files) | set(y.files))
               if k not in x.files or k not in y.files or x[k].shape != y[k].shape
               or x[k].tobytes() != y[k].tobytes()]
        if bad:
            differ += 1
            print(f"differs: {name}: {', '.join(bad[:6])}{' ...' if len(bad) > 6 else ''}")
        else:
            same += 1
    print(f"{same} bit-identical, {differ} differ, of {len(names)} tests")
    return 1 if differ else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m tools.compare_dumps BEFORE_DIR AFTER_DIR")
    sys.exit(compare(Path(sys.argv[1]), Path(sys.argv[2])))
