"""What the family benchmarks share: where they keep their checkpoints, running one side in its
own process and reading its JSON line, pooling several processes' timings, and the process
figures the workers report (RSS from /proc, the peak reset between loading and generating).

Workers import this module too (they run in the project venv or a reference env: standard library
only)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
from pathlib import Path


def bench_dir() -> Path:
    return Path(os.environ.get("AUDIOCPP_BENCH_DIR", Path.home() / ".cache" / "audiocpp-bench"))


def worker_env() -> dict[str, str]:
    """The environment of a worker process: without the caller's PYTHONPATH / VIRTUAL_ENV, so each
    side imports only its own interpreter's packages."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def require(python: Path, fix: str) -> None:
    if not python.exists():
        raise SystemExit(f"{python} is missing: run {fix}")


def run_worker_process(cmd: list[str], side: str) -> dict:
    """Run one worker; its last stdout line is its JSON result."""
    proc = subprocess.run(cmd, capture_output=True, text=True, env=worker_env())
    if proc.returncode != 0:
        raise SystemExit(f"{side} worker failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def merge(runs: list[dict]) -> dict:
    """Several worker processes of one side -> one record (all timings pooled, worst RSS)."""
    out = dict(runs[0])
    out["walls"] = [w for r in runs for w in r["walls"]]
    out["ttfa"] = [t for r in runs for t in r["ttfa"]]
    out["load_s"] = statistics.median(r["load_s"] for r in runs)
    rss = [r["peak_rss_gen_mb"] for r in runs if r.get("peak_rss_gen_mb")]
    out["peak_rss_gen_mb"] = max(rss) if rss else None
    out["process_medians"] = [statistics.median(r["walls"]) for r in runs]
    return out


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):7.2f} s ({min(values):.2f}..{max(values):.2f})"


def status_bytes(key: str) -> int:
    """A size field of /proc/self/status (VmRSS, VmHWM) in bytes; 0 where there is none."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def reset_peak() -> bool:
    """Reset VmHWM (Linux clear_refs 5) so that a generation peak excludes loading."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False
