"""``--weights f32,bf16,q8_0`` of the family benchmarks (omnivoice, voxcpm2, audio8_tts): the same
real-size random-weight checkpoint packaged in each weight type, run side by side with the
default load and session options (``device`` and ``compute_dtype`` auto), one process per type,
one at a time (real-size models take several GB each).

Each worker (``tools/weights_worker.py``) reports: the package size, the time to read the file
once and the load time (to the first session), peak RSS after loading and while generating (above
the process's baseline: Python, torch, audiocpp), the resident bytes of each weight kind, wall
median and RTF of ``--repeats`` runs after a warm-up. f32 (else the first type listed) is the
reference of the drift figures: token / code match (omnivoice, audio8_tts), latent difference
(voxcpm2) and audio cosine.

Packages are written once under ``$AUDIOCPP_BENCH_DIR`` (default ``~/.cache/audiocpp-bench``)
as ``<family>-<type>.gguf`` with ``audiocpp package``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tools.bench_common import bench_dir, cosine, free_gib, run_worker_process, write_json

HERE = Path(__file__).resolve().parent
# the interpreter that runs the benchmark (the project venv, or a GPU machine's)
OURS_PY = Path(sys.executable)
WEIGHT_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0")


def parse_weights(text: str) -> list[str]:
    kinds = [k.strip().lower() for k in text.split(",") if k.strip()]
    bad = [k for k in kinds if k not in WEIGHT_TYPES]
    if bad or not kinds:
        raise SystemExit(f"--weights takes a comma-separated list of {', '.join(WEIGHT_TYPES)}; got {text!r}")
    return kinds


def ensure_package(name: str, folder: Path, kind: str, *, family: str | None = None) -> Path:
    """``<bench dir>/<name>-<kind>.gguf``, packaged from ``folder`` once (by ``family``, default ``name``)."""
    family = family or name
    out = bench_dir() / f"{name}-{kind}.gguf"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".partial-{out.name}")
    print(f"packaging {folder} as {kind} -> {out} (once) ...", file=sys.stderr, flush=True)
    cmd = [str(OURS_PY), "-c", "from audiocpp.cli.main import main; main()", "package", "--family", family,
           "--input", str(folder), "--type", kind, "--out", str(tmp), "--overwrite"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise SystemExit(f"packaging {kind} failed:\n{proc.stderr[-3000:]}")
    os.replace(tmp, out)
    return out


def each_package(name: str, folder: Path, weights: str, *, family: str | None = None):
    """``(kind, package)`` for each type of ``weights``, ``folder`` packaged once per type."""
    for kind in parse_weights(weights):
        yield kind, ensure_package(name, folder, kind, family=family)


def compute_of(kind: str) -> str:
    """The compute mode of a weight type's worker: float32 (exact) for f32, else the default (auto)."""
    return "float32" if kind == "f32" else "auto"


def run_tool_worker(script: str, family: str, path: Path, args: list[str], name: str | None = None) -> dict:
    """``tools/<script> FAMILY PACKAGE ARGS...`` in this interpreter (weights_worker.py, batch_worker.py,
    profile_worker.py): its JSON record."""
    cmd = [str(OURS_PY), str(HERE / script), family, str(path), *args]
    return run_worker_process(cmd, name or path.name)


def run_worker(family: str, path: Path, save: Path, opts: Options) -> dict:
    return run_tool_worker("weights_worker.py", family, path, [
        "--save", str(save), "--repeats", str(opts.repeats), "--threads", str(opts.threads),
        *opts.worker_args, *(["--device", opts.device] if opts.device else [])])


def drift(family: str, ref: dict, other: dict) -> str:
    """One line: what moved against the reference type."""
    parts = []
    if "first_logits" in ref and "first_logits" in other:
        a, b = ref["first_logits"].astype(np.float64), other["first_logits"].astype(np.float64)
        finite = np.isfinite(a) & np.isfinite(b)
        rel = np.sqrt(((a - b)[finite] ** 2).mean() / (a[finite] ** 2).mean())
        top1 = float((a.argmax(-1) == b.argmax(-1)).mean())
        parts.append(f"first-step logits rel RMS {rel:.2e}, argmax equal {top1:.1%}")
    if "greedy" in ref and "greedy" in other:
        a, b = ref["greedy"], other["greedy"]
        if a.shape == b.shape:
            same = a == b
            first = int(np.argmin(same.all(axis=0))) if not same.all() else a.shape[-1]
            parts.append(f"greedy codes equal {float(same.mean()):.1%} "
                         f"(identical up to frame {first} of {a.shape[-1]})")
        else:
            parts.append(f"greedy codes shape {b.shape} vs {a.shape}")
    key = "latents" if family == "voxcpm2" else "tokens"
    a, b = ref[key], other[key]
    if a.shape != b.shape:
        parts.append(f"{key} shape {b.shape} vs {a.shape}")
    elif family == "voxcpm2":
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
        parts.append(f"first patch max |diff| {diff[0].max():.4f}; all latents max |diff| {diff.max():.4f} "
                     f"({diff.max() / max(np.abs(a).max(), 1e-12):.2%} of the largest), "
                     f"mean {diff.mean():.5f}")
    else:
        what = "codes" if family == "audio8_tts" else "tokens"
        same = a == b
        first = int(np.argmin(same.all(axis=0))) if not same.all() else a.shape[-1]
        parts.append(f"{what} equal {float(same.mean()):.1%} "
                     f"(identical up to frame {first} of {a.shape[-1]}; "
                     "random weights amplify any difference)")
    parts.append(f"audio cosine {cosine(ref['audio'], other['audio']):.5f}"
                 + ("" if len(ref["audio"]) == len(other["audio"]) else
                    f" (first {min(len(ref['audio']), len(other['audio']))} samples; lengths differ)"))
    return "; ".join(parts)


@dataclass
class Options:
    weights: str = "f32,bf16,q8_0"
    repeats: int = 2
    threads: int = 1
    worker_args: list[str] = field(default_factory=list)  # the family's request size (--steps, --patches...)
    device: str | None = None
    json: Path | None = None


def run(family: str, folder: Path, opts: Options) -> list[dict]:
    """Package ``folder`` in each of ``opts.weights`` and print the side-by-side table."""
    paths = dict(each_package(family, folder, opts.weights))
    work = Path(tempfile.mkdtemp(prefix=f"{family}-weights-"))
    rows = []
    try:
        for kind in paths:
            print(f"{kind}: {paths[kind].name} ({paths[kind].stat().st_size / 2**30:.2f} GiB); "
                  f"available memory {free_gib():.1f} GiB", file=sys.stderr, flush=True)
            save = work / f"{kind}.npz"
            rows.append({"weights": kind, **run_worker(family, paths[kind], save, opts), "save": str(save)})
        print_table(family, rows, opts)
        outputs = {r["weights"]: dict(np.load(r["save"])) for r in rows}
        ref = "f32" if "f32" in outputs else rows[0]["weights"]
        for row in rows:
            if row["weights"] != ref:
                print(f"drift {row['weights']} vs {ref}: "
                      f"{drift(family, outputs[ref], outputs[row['weights']])}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_json(opts.json, rows)
    return rows


def print_table(family: str, rows: list[dict], opts: Options) -> None:
    gib = 2**30
    print(f"\n== {family}, real-size dims, random weights: one process per weight type, "
          f"{opts.threads} thread(s), {opts.repeats} timed runs after a warm-up; "
          f"default options (device {rows[0]['device']}, compute_dtype auto)")
    print(f"{'weights':8s} {'compute':9s} {'file GiB':>8s} {'read 1x s':>9s} {'load s':>7s} "
          f"{'wall median (min..max)':24s} {'RTF':>6s} {'RSS loaded':>10s} {'peak load':>10s} "
          f"{'peak gen':>9s} {'loaded/file':>11s} {'peak/file':>9s}  resident weights (GiB)")
    for r in rows:
        walls = r["walls"]
        med = statistics.median(walls)
        file = r["file_bytes"] / gib
        peak = max(r["peak_rss_load"], r["peak_rss_gen"] or 0)
        resident = ", ".join(f"{k} {v / gib:.2f}" for k, v in sorted(r["resident"].items()) if v)
        print(f"{r['weights']:8s} {r['compute_dtype']:9s} {file:8.2f} {r['read_once_s']:9.2f} "
              f"{r['load_s']:7.2f} {med:8.2f} s ({min(walls):.2f}..{max(walls):.2f}){'':3s} "
              f"{med / r['audio_s']:6.2f} {r['rss_loaded'] / gib:10.2f} {r['peak_rss_load'] / gib:10.2f} "
              f"{(r['peak_rss_gen'] or 0) / gib:9.2f} "
              f"{(r['rss_loaded'] - r['baseline_rss']) / r['file_bytes']:11.2f} "
              f"{(peak - r['baseline_rss']) / r['file_bytes']:9.2f}  {resident}")
    base = {r["weights"]: statistics.median(r["walls"]) for r in rows}
    if "bf16" in base:
        for kind, wall in base.items():
            if kind != "bf16":
                print(f"speed {kind} vs bf16: wall ratio {wall / base['bf16']:.2f} (below 1: faster)")
    print("RSS in GiB: loaded = after loading and the first session (the weights as held); "
          "peak gen = the highest while generating (weights + activations: KV caches, the codec's "
          "feature maps); the ratios subtract the baseline")
    print("bytes read with read() while loading (the map's page faults excluded): " + ", ".join(
        f"{r['weights']} {r.get('load_read_calls_bytes', 0) / 2**20:.0f} MiB" for r in rows))
    print(f"baseline RSS (python, torch, audiocpp imported): {rows[0]['baseline_rss'] / gib:.2f} GiB; "
          "load average during the runs: " + ", ".join(f"{r['weights']} {r['loadavg']}" for r in rows))
    sys.stdout.flush()
