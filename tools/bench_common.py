"""What every benchmark shares: where the checkpoints live, running one side in its own process and
reading its JSON line, a side's timing loop in that process (load, warm-up, repeats, first audio),
pooling several processes' timings (medians and spreads), the process figures (RSS from /proc, the
peak reset between loading and generating; the load average), the ISA levels a run can be held to,
and the machine's rates (GEMM, read bandwidth) the profiles and kernel tables compare against.

Workers import this module too (they run in the project venv or a reference env): standard library
only at import; torch and audiocpp are imported inside the functions that need them."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
S = TypeVar("S")


def bench_dir() -> Path:
    return Path(os.environ.get("AUDIOCPP_BENCH_DIR", Path.home() / ".cache" / "audiocpp-bench"))


# -- running a side in its own process ---------------------------------------------------------------
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


# -- a side's timings, in its worker process ---------------------------------------------------------
def timed_runs(run: Callable[[], T], repeats: int) -> tuple[list[float], T | None]:
    """``repeats`` timed calls of ``run``: their walls and the last call's result."""
    walls, last = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        last = run()
        walls.append(time.perf_counter() - start)
    return walls, last


def measure_side(load: Callable[[], S], run: Callable[[S], T], repeats: int, *,
                 warm_up: Callable[[S], Any] | None = None,
                 first_audio: Callable[[S], float] | None = None) -> tuple[dict, T | None]:
    """One side of a benchmark in its worker: ``load()`` (timed), one warm-up run (``warm_up``, default
    ``run``: the first touch of every weight page, the allocator), the peak RSS reset, ``repeats`` timed
    runs and ``repeats`` time-to-first-audio runs. Returns the record every family's table reads (load
    time, walls, first audio, RSS in MB) and the last run's result."""
    start = time.perf_counter()
    side = load()
    load_s = time.perf_counter() - start
    peak_load_mb = status_bytes("VmHWM") / 2**20
    (warm_up or run)(side)
    reset = reset_peak()
    walls, last = timed_runs(lambda: run(side), repeats)
    ttfa = [first_audio(side) for _ in range(repeats)] if first_audio is not None else []
    return {"load_s": load_s, "walls": walls, "ttfa": ttfa, "peak_rss_load_mb": peak_load_mb,
            "peak_rss_gen_mb": status_bytes("VmHWM") / 2**20 if reset else None,
            "rss_now_mb": status_bytes("VmRSS") / 2**20}, last


def first_audio_time(events: Iterable[Any], audio: Callable[[Any], bool] = lambda event: True) -> float:
    """Seconds from the start of a stream to its first ``audio`` event (NaN: none); the stream runs to its
    end."""
    start, first = time.perf_counter(), None
    for event in events:
        if first is None and audio(event):
            first = time.perf_counter() - start
    return first if first is not None else float("nan")


# -- pooling and summarizing ---------------------------------------------------------------------------
def merge(runs: list[dict]) -> dict:
    """Several worker processes of one side -> one record (all timings pooled, worst RSS)."""
    out = dict(runs[0])
    out["walls"] = [w for r in runs for w in r["walls"]]
    out["ttfa"] = [t for r in runs for t in r.get("ttfa", [])]
    out["load_s"] = statistics.median(r["load_s"] for r in runs)
    rss = [r["peak_rss_gen_mb"] for r in runs if r.get("peak_rss_gen_mb")]
    out["peak_rss_gen_mb"] = max(rss) if rss else None
    out["process_medians"] = [statistics.median(r["walls"]) for r in runs]
    return out


def spread(values: list[float]) -> str:
    """``median s (min..max)``: the figure and the noise around it."""
    return f"{statistics.median(values):7.2f} s ({min(values):.2f}..{max(values):.2f})"


def ratio(values: list[float], baseline: list[float]) -> float:
    """Median over the baseline's median (below 1: faster than the baseline)."""
    return statistics.median(values) / statistics.median(baseline)


def cosine(a: Any, b: Any) -> float:
    """Cosine of two signals over their common length, in float64 (NaN where one is silent)."""
    import numpy as np

    n = min(len(a), len(b))
    a, b = np.asarray(a[:n], np.float64), np.asarray(b[:n], np.float64)
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b / denom) if denom else float("nan")


def write_json(path: Path | None, rows: Any) -> None:
    """The raw results, where the command names a file for them (``--json``)."""
    if path:
        Path(path).write_text(json.dumps(rows, indent=2), encoding="utf-8")


def loadavg(digits: int = 1) -> str:
    try:
        return " ".join(f"{x:.{digits}f}" for x in os.getloadavg())
    except OSError:
        return "?"


# -- process figures -----------------------------------------------------------------------------------
def proc_number(path: str, key: str) -> int:
    """The number after ``key:`` in a /proc file (``/proc/self/status``, ``/proc/self/io``,
    ``/proc/meminfo``); 0 where there is none."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def status_bytes(key: str) -> int:
    """A size field of /proc/self/status (VmRSS, VmHWM) in bytes; 0 where there is none."""
    return proc_number("/proc/self/status", key) * 1024


def reset_peak() -> bool:
    """Reset VmHWM (Linux clear_refs 5) so that a generation peak excludes loading."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def free_gib() -> float:
    """MemAvailable of /proc/meminfo in GiB (NaN where there is none)."""
    return proc_number("/proc/meminfo", "MemAvailable") / 2**20 or float("nan")


# -- ISA levels ----------------------------------------------------------------------------------------
LIMITS = ("AUDIOCPP_CPU_ISA", "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")


def isa_levels(value: str) -> list[str]:
    """The levels ``--isa`` names (``all``: every level of this CPU, best first); refuses a level this CPU
    does not have or that does not exist."""
    from audiocpp.engine.nn.kernels import cpu_isa

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


def level_env(level: str | None) -> dict[str, str]:
    """This environment with the limits that make the host compute as a CPU of ``level``
    (``engine.nn.kernels.cpu_isa.LEVEL_ENV``: our kernels' and torch's, oneDNN's and MKL's own); None: as it
    is."""
    if level is None:
        return dict(os.environ)
    from audiocpp.engine.nn.kernels import cpu_isa

    env = {k: v for k, v in os.environ.items() if k not in LIMITS}
    env.update(cpu_isa.LEVEL_ENV.get(level, {cpu_isa.CAP_ENV: level}))
    return env


# -- the machine's rates -------------------------------------------------------------------------------
def seconds_per_call(fn: Callable[[], Any], budget: float = 0.4) -> float:
    """Seconds per call: two warm-up calls, then as many as ``budget`` seconds allow (at least one)."""
    fn()
    fn()
    start, n = time.perf_counter(), 0
    while n == 0 or time.perf_counter() - start < budget:
        fn()
        n += 1
    return (time.perf_counter() - start) / n


def _best_of_three(fn: Callable[[], Any]) -> float:
    """The fastest of three timed calls after one warm-up call."""
    fn()
    times = []
    for _ in range(3):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def gemm_rate(dtype: str = "float32", n: int = 2048) -> float:
    """FLOP/s of an ``n`` x ``n`` x ``n`` torch matrix product in ``dtype`` (this process's threads)."""
    import torch

    a = torch.randn(n, n).to(getattr(torch, dtype))
    b = torch.randn(n, n).to(getattr(torch, dtype))
    return 2 * n**3 / _best_of_three(lambda: a @ b)


def read_bandwidth(gib: float = 1.0) -> float:
    """Bytes per second of a sum over ``gib`` GiB of float32 (this process's threads)."""
    import torch

    big = torch.ones(int(gib * 2**28))
    return big.nbytes / _best_of_three(big.sum)
