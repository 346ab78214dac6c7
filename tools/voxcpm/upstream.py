"""Run upstream voxcpm 2.0.3 on a list of cases (tools/voxcpm/reference_v2.py in .ref-envs/voxcpm)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def run_upstream_cases(root: Path, spec: dict[str, Any]) -> bool:
    """Write ``spec`` to ``root/cases.json`` and dump upstream's results to ``root/out``; False on failure."""
    (root / "cases.json").write_text(json.dumps(spec), encoding="utf-8")
    proc = subprocess.run([str(REPO / ".ref-envs/voxcpm/bin/python"), str(REPO / "tools/voxcpm/reference_v2.py"),
                           str(root / "cases.json"), str(root / "out")], capture_output=True, text=True)
    if proc.returncode:
        print(proc.stderr[-3000:], file=sys.stderr)
    return proc.returncode == 0
