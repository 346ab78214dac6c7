"""What the VoxCPM1 and VoxCPM2 benchmarks share: the checkpoint folders per compute dtype,
running tools/voxcpm2/bench_worker.py for one side, pooling its timings and printing a row."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from tools.bench_common import bench_dir, merge, run_worker_process, spread

__all__ = ["TEXT", "bench_dir", "default_dtypes", "dtype_folders", "merge", "print_row", "run_settings",
           "run_worker", "spread"]

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).resolve().with_name("bench_worker.py")
OURS_PY = REPO / ".venv" / "bin" / "python"
UPSTREAM_PY = REPO / ".ref-envs" / "voxcpm" / "bin" / "python"
TEXT = "The quick brown fox jumps over the lazy dog."


def dtype_folders(base: Path) -> dict[str, Path]:
    """One folder per upstream compute dtype: symlinks to ``base`` with ``config.json``'s dtype set."""
    folders = {}
    for dtype in ("float32", "bfloat16"):
        folder = base.with_name(f"{base.name}-{dtype}")
        folder.mkdir(parents=True, exist_ok=True)
        for item in base.iterdir():
            link = folder / item.name
            if item.name != "config.json" and not link.exists():
                link.symlink_to(item)
        config = json.loads((base / "config.json").read_text(encoding="utf-8"))
        config["dtype"] = dtype
        (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
        folders[dtype] = folder
    return folders


def run_worker(side: str, ckpt: Path, dtype: str, threads: int, *, patches: int, repeats: int,
               family: str) -> dict:
    python = OURS_PY if side == "ours" else UPSTREAM_PY
    if not python.exists():
        raise SystemExit(f"{python} is missing: run tools/setup_env.sh and tools/reference_envs/voxcpm.sh")
    cmd = [str(python), str(WORKER), side, str(ckpt), "--dtype", dtype, "--patches", str(patches),
           "--repeats", str(repeats), "--threads", str(threads), "--text", TEXT, "--family", family]
    return run_worker_process(cmd, side)


def print_row(result: dict, title: str) -> None:
    """One dtype/threads setting: both sides' medians, RTF, first audio, RSS and the ratio."""
    print(f"\n== {title}")
    print(f"{'side':9s} {'wall median (min..max)':28s} {'RTF':>7s} {'first audio (stream)':28s} "
          f"{'peak RSS gen':>13s} {'load':>8s}  per-process medians")
    for side in ("upstream", "ours"):
        r = result.get(side)
        if r is None:
            continue
        rtf = statistics.median(r["walls"]) / r["audio_s"]
        rss = f"{r['peak_rss_gen_mb'] / 1024:.2f} GiB" if r.get("peak_rss_gen_mb") else "n/a"
        per = ", ".join(f"{m:.2f}" for m in r["process_medians"])
        print(f"{side:9s} {spread(r['walls']):28s} {rtf:7.2f} {spread(r['ttfa']):28s} {rss:>13s} "
              f"{r['load_s']:6.1f} s  {per}")
    if "upstream" in result and "ours" in result:
        up, ours = result["upstream"], result["ours"]
        wall = statistics.median(ours["walls"]) / statistics.median(up["walls"])
        ttfa = statistics.median(ours["ttfa"]) / statistics.median(up["ttfa"])
        print(f"ratio ours/upstream: wall {wall:.2f}, first audio {ttfa:.2f}")
    sys.stdout.flush()


def default_dtypes() -> str:
    """The compute dtypes compared by default: float32, and bfloat16 where the CPU (at the level this
    process runs, ``AUDIOCPP_CPU_ISA``) computes it in hardware; emulated, a bfloat16 run takes hours."""
    from audiocpp.engine.nn.cpu_isa import native_bf16

    return "float32,bfloat16" if native_bf16() else "float32"


def run_settings(args, folders: dict[str, Path], family: str, describe) -> list[dict]:
    """Every dtype x threads setting: ``args.rounds`` alternating upstream/ours processes each. With
    ``args.package`` (a weight type), also ours on that package in the default compute mode
    (``auto``) against upstream in float32: the default package mode against upstream's."""
    settings = [(dtype, folders[dtype], dtype) for dtype in (args.dtypes or default_dtypes()).split(",")]
    if getattr(args, "package", None):
        from tools.weights_bench import ensure_package

        base = folders["float32"].with_name(folders["float32"].name.removesuffix("-float32"))
        settings.append(("float32", ensure_package(family, base, args.package, family=family), "auto"))
    rows = []
    for dtype, ours_ckpt, ours_dtype in settings:
        for threads in (int(t) for t in args.threads.split(",")):
            runs: dict[str, list[dict]] = {"upstream": [], "ours": []}
            for _ in range(args.rounds):
                for side in ("ours",) if args.ours_only else ("upstream", "ours"):
                    ckpt, side_dtype = ((folders[dtype], dtype) if side == "upstream"
                                        else (ours_ckpt, ours_dtype))
                    runs[side].append(run_worker(side, ckpt, side_dtype, threads, patches=args.patches,
                                                 repeats=args.repeats, family=family))
            result = {"dtype": dtype, "threads": threads, **{s: merge(r) for s, r in runs.items() if r}}
            if ours_ckpt != folders[dtype]:
                result["dtype"] = f"upstream {dtype}, ours {ours_ckpt.name} compute {ours_dtype}"
            rows.append(result)
            print_row(result, describe(result))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return rows
