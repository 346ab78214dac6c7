"""``--profile`` of the family benchmarks: where one request's time goes, stage by stage, at the real
dimensions with random weights, against what the stage's work would take on this machine.

For each weight type (default ``f32``, the exact mode, and ``q8_0``, the fastest mode here) one
worker process (``tools/profile_worker.py``) measures the machine's GEMM rate (float32, bfloat16)
and read bandwidth, loads the package, warms up, times the stages of one fixed-length request
(median of the repeats) and counts each stage's aten ops, FLOPs and bytes in one more run. Printed
per stage: its time and share of the wall, calls, time and ops per call, GFLOP and MB per call, the
time that work takes at the measured rates (``bound``: the larger of compute and memory), how far
above it the stage runs, and what bounds it (``compute``, ``memory``, or ``overhead`` where the
stage takes over 3x its bound: per-op dispatch, Python, small kernels).

With ``--batch N`` (a single size) the N requests run as one batch: each stage call is then one
batched call (its FLOPs and bytes those of all rows), so the table says what bounds a batch.

Packages come from tools/weights_bench.py (``<bench dir>/<family>-<type>.gguf``, made once).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from tools.weights_bench import compute_of, each_package, run_tool_worker


@dataclass
class Options:
    weights: str = "f32,q8_0"
    threads: int = 2
    repeats: int = 2
    batch: int = 1  # requests run as one batch
    worker_args: list[str] = field(default_factory=list)  # the request's size (--frames, --patches...)


def run(family: str, folder: Path, opts: Options, *, label: str | None = None) -> list[dict]:
    """Package ``folder`` in each weight type, profile one request on each, print the tables."""
    results = []
    for kind, path in each_package(label or family, folder, opts.weights, family=family):
        results.append({**profile(family, path, compute_of(kind), opts, path.name), "weights": kind})
        print_table(label or family, results[-1])
    return results


def run_package(family: str, path: Path, computes: list[str], opts: Options, *, label: str) -> list[dict]:
    """Profile one request on a given package (a real model's) in each compute mode, print the tables."""
    results = []
    for compute in computes:
        result = profile(family, path, compute, opts, f"{path.name} ({compute})")
        results.append({**result, "weights": compute, "real": True})
        print_table(label, results[-1])
    return results


def profile(family: str, path: Path, compute: str, opts: Options, name: str) -> dict:
    """One worker process: the profile of the package ``path`` in the compute mode ``compute``."""
    return run_tool_worker("profile_worker.py", family, path, [
        "--threads", str(opts.threads), "--repeats", str(opts.repeats), "--batch", str(opts.batch),
        "--compute-dtype", compute, *opts.worker_args], name)


def bound_of(stage: dict, calls: int, rates: dict[str, float]) -> tuple[float, str]:
    """Seconds one call's work takes at the machine's rates, and which rate sets it."""
    compute = (stage["flops"] / rates["gemm_float32"] + stage["half_flops"] / rates["gemm_bfloat16"]) / calls
    memory = stage["bytes"] / calls / rates["read_bandwidth"]
    return (compute, "compute") if compute >= memory else (memory, "memory")


def _requests(r: dict) -> str:
    batch = r.get("batch", 1)
    return "one request" if batch == 1 else f"{batch} requests as one batch"


def profile_batch(value: str | None) -> int:
    """The family benches' ``--profile --batch N``: one batch size (default 1)."""
    if value is None:
        return 1
    if not value.isdigit() or int(value) < 1:
        raise SystemExit(f"--profile takes one batch size (--batch 8), got --batch {value}")
    return int(value)


def print_table(name: str, r: dict) -> None:
    rates, dtype = r["rates"], r["compute_dtype"]
    weights = (f"{r['weights']} weights (compute {dtype}), real-size dims, random weights" if "real" not in r
               else f"real weights, compute mode {r['weights']} ({dtype})")
    print(f"\n== {name}, {weights}, "
          f"{r['threads']} thread(s); {_requests(r)}, {r['audio_s']:.2f} s of audio, wall {r['wall']:.2f} s, "
          f"RTF {r['wall'] / r['audio_s']:.2f}")
    print(f"machine: GEMM {rates['gemm_float32'] / 1e9:.0f} GFLOP/s float32, "
          f"{rates['gemm_bfloat16'] / 1e9:.0f} bfloat16; read {rates['read_bandwidth'] / 1e9:.1f} GB/s; "
          f"load average {r['loadavg']}")
    print(f"{'stage':26s} {'s':>7s} {'share':>6s} {'calls':>6s} {'ms/call':>9s} {'ops/call':>9s} "
          f"{'GFLOP/call':>10s} {'MB/call':>9s} {'bound ms':>9s} {'x bound':>8s}  bound by")
    nested = set(r.get("nested", []))
    timed = 0.0
    for st in r["stages"]:
        if st["name"] not in nested:
            timed += st["seconds"]
    other = dict(r["other"], name="other (text, prompt, loop)", seconds=max(0.0, r["wall"] - timed), calls=1)
    for st in [*r["stages"], other]:
        calls = max(1, st["calls"])
        seconds = st["seconds"]
        if not st["calls"] and not seconds:
            continue
        bound, kind = bound_of(st, calls, rates)
        per_call = seconds / calls
        times = per_call / bound if bound else float("inf")
        verdict = f"overhead ({kind} {times:.1f}x)" if times > 3 else kind
        label = ("  " if st["name"] in nested else "") + st["name"]
        gflop = (st["flops"] + st["half_flops"]) / calls / 1e9
        print(f"{label:26s} {seconds:7.2f} {seconds / r['wall']:6.1%} {st['calls']:6d} {per_call * 1e3:9.2f} "
              f"{st['ops'] / calls:9.0f} {gflop:10.3f} {st['bytes'] / calls / 1e6:9.1f} "
              f"{bound * 1e3:9.2f} {times:8.1f}  {verdict}")
    if nested:
        print("(indented stages run inside another stage; their time is in its time too)")
    sys.stdout.flush()
