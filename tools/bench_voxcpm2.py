#!/usr/bin/env python3
"""VoxCPM2 benchmark: ours against upstream (PyPI voxcpm 2.0.3) in the same run.

    python tools/bench.py voxcpm2 [--patches 4] [--repeats 3] [--threads 1,2] [--dtypes float32,bfloat16]

A VoxCPM2-sized checkpoint with random weights (28+8 LM layers of 2048, 12+12 local layers of
1024, AudioVAE 16 kHz -> 48 kHz; reference section 2) is built once, in bf16 as the real
checkpoints are, under ``$AUDIOCPP_BENCH_DIR`` (default ``~/.cache/audiocpp-bench``; about
5 GB). Each side runs in its own process (tools/voxcpm/bench_worker.py): load, one warm-up,
then ``--repeats`` offline runs of one fixed sentence, generating exactly ``--patches`` patches
(0.16 s of audio each; random weights never stop on their own), and ``--repeats`` streaming
runs for the time to first audio. Upstream computes in its checkpoint config's ``dtype``, ours
with the session option ``compute_dtype``; the VAE is float32 on both sides. Printed: wall
median (min..max), RTF, time to first audio, peak RSS while generating, ours/upstream ratio.

The machine's cores may be shared: the repeats and the min..max spread show the noise.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKER = REPO / "tools" / "voxcpm" / "bench_worker.py"
OURS_PY = REPO / ".venv" / "bin" / "python"
UPSTREAM_PY = REPO / ".ref-envs" / "voxcpm" / "bin" / "python"
TEXT = "The quick brown fox jumps over the lazy dog."


def bench_dir() -> Path:
    return Path(os.environ.get("AUDIOCPP_BENCH_DIR", Path.home() / ".cache" / "audiocpp-bench"))


def ensure_checkpoint(root: Path) -> dict[str, Path]:
    """The real-size checkpoint (bf16 weights) and one folder per upstream compute dtype."""
    sys.path.insert(0, str(REPO / "tools"))
    from voxcpm.checkpoint import REAL_V2, write_checkpoint

    base = root / "voxcpm2-real"
    if not (base / "config.json").is_file() or not (base / "audiovae.pth").is_file():
        print(f"building the VoxCPM2-sized random checkpoint in {base} (once; ~5 GB)...", file=sys.stderr)
        import torch

        write_checkpoint(base, REAL_V2, seed=2024, dtype=torch.bfloat16)
    folders = {}
    for dtype in ("float32", "bfloat16"):
        folder = root / f"voxcpm2-real-{dtype}"
        folder.mkdir(parents=True, exist_ok=True)
        for item in base.iterdir():
            if item.name == "config.json":
                continue
            link = folder / item.name
            if not link.exists():
                link.symlink_to(item)
        config = json.loads((base / "config.json").read_text(encoding="utf-8"))
        config["dtype"] = dtype
        (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
        folders[dtype] = folder
    return folders


def run_worker(side: str, ckpt: Path, dtype: str, threads: int, args: argparse.Namespace) -> dict:
    python = OURS_PY if side == "ours" else UPSTREAM_PY
    if not python.exists():
        raise SystemExit(f"{python} is missing: run tools/setup_env.sh and tools/reference_envs/voxcpm.sh")
    cmd = [str(python), str(WORKER), side, str(ckpt), "--dtype", dtype, "--patches", str(args.patches),
           "--repeats", str(args.repeats), "--threads", str(threads), "--text", TEXT]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{side} worker failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):7.2f} s ({min(values):.2f}..{max(values):.2f})"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tools/bench.py voxcpm2", description=__doc__.split("\n\n")[0])
    parser.add_argument("--patches", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", default="1,2", help="comma-separated torch thread counts")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--ours-only", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    args = parser.parse_args(argv)
    folders = ensure_checkpoint(bench_dir())
    rows = []
    for dtype in args.dtypes.split(","):
        for threads in (int(t) for t in args.threads.split(",")):
            result = {"dtype": dtype, "threads": threads}
            if not args.ours_only:
                result["upstream"] = run_worker("upstream", folders[dtype], dtype, threads, args)
            result["ours"] = run_worker("ours", folders[dtype], dtype, threads, args)
            rows.append(result)
            print_row(result, args)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0


def print_row(result: dict, args: argparse.Namespace) -> None:
    print(f"\n== VoxCPM2-sized, {result['dtype']}, {result['threads']} thread(s), {args.patches} patches "
          f"x {args.repeats} repeats, text {TEXT!r}")
    print(f"{'side':9s} {'wall median (min..max)':28s} {'RTF':>7s} {'first audio (stream)':28s} "
          f"{'peak RSS gen':>13s} {'load':>8s}")
    for side in ("upstream", "ours"):
        r = result.get(side)
        if r is None:
            continue
        rtf = statistics.median(r["walls"]) / r["audio_s"]
        rss = f"{r['peak_rss_gen_mb'] / 1024:.2f} GiB" if r.get("peak_rss_gen_mb") else "n/a"
        print(f"{side:9s} {spread(r['walls']):28s} {rtf:7.2f} {spread(r['ttfa']):28s} {rss:>13s} "
              f"{r['load_s']:6.1f} s")
    if "upstream" in result:
        up, ours = result["upstream"], result["ours"]
        wall = statistics.median(ours["walls"]) / statistics.median(up["walls"])
        ttfa = statistics.median(ours["ttfa"]) / statistics.median(up["ttfa"])
        print(f"ratio ours/upstream: wall {wall:.2f}, first audio {ttfa:.2f}")
    sys.stdout.flush()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
