#!/usr/bin/env python3
"""VoxCPM1 benchmark: ours against upstream (PyPI voxcpm 2.0.3) in the same run, at VoxCPM-0.5B size.

    python tools/bench.py voxcpm1 [--patches 8] [--repeats 3] [--rounds 2] [--threads 1] [--dtypes float32,bfloat16]

A checkpoint of VoxCPM-0.5B's dimensions with random weights (24+6 LM layers of 1024, local
encoder / DiT 4 layers of 1024, patch 2, AudioVAE 16 kHz; tools/voxcpm1/checkpoint.py REAL_05B)
is built once, in bf16 as ``pytorch_model.bin`` like the real one, under ``$AUDIOCPP_BENCH_DIR``
(default ``~/.cache/audiocpp-bench``; about 1.4 GB). Each side runs in its own process
(tools/voxcpm/bench_worker.py, shared with the VoxCPM2 benchmark): load, one warm-up, then
``--repeats`` offline runs of one fixed sentence generating exactly ``--patches`` patches
(80 ms of audio each; random weights never stop on their own) and ``--repeats`` streaming runs
(time to first audio). ``--rounds`` alternates upstream and ours processes that many times, so a
busy period of the shared machine hits both sides. Printed per dtype and thread count: wall
median (min..max over every timed run), RTF, time to first audio, peak RSS while generating,
load time and the ours/upstream ratio of the medians.

``--drift`` measures instead what the faster paths change at this size (ours only, float32 folder
as the baseline, ``--patches`` patches of the same seeded request): a Q8_0 and a BF16 package, a
VoxCPM.cpp-layout Q8_0 GGUF (tools/voxcpm1/convert_voxcpm_cpp.py, VAE F16) and bfloat16 compute.
Printed: max latent difference (and relative to the largest latent) and audio cosine.
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
    """The 0.5B-size checkpoint (bf16 weights) and one folder per upstream compute dtype."""
    base = root / "voxcpm1-0.5b-real"
    if not (base / "config.json").is_file() or not (base / "audiovae.pth").is_file():
        print(f"building the VoxCPM-0.5B-sized random checkpoint in {base} (once; ~1.4 GB)...", file=sys.stderr)
        import importlib.util

        import torch

        spec = importlib.util.spec_from_file_location("voxcpm1_checkpoint", REPO / "tools" / "voxcpm1" / "checkpoint.py")
        module = importlib.util.module_from_spec(spec)
        assert spec.loader is not None
        spec.loader.exec_module(module)
        module.write_v1_checkpoint(base, module.REAL_05B, seed=2025, weights="bin", dtype=torch.bfloat16)
    folders = {}
    for dtype in ("float32", "bfloat16"):
        folder = root / f"voxcpm1-0.5b-real-{dtype}"
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


def run_worker(side: str, ckpt: Path, dtype: str, threads: int, args: argparse.Namespace) -> dict:
    python = OURS_PY if side == "ours" else UPSTREAM_PY
    if not python.exists():
        raise SystemExit(f"{python} is missing: run tools/setup_env.sh and tools/reference_envs/voxcpm.sh")
    cmd = [str(python), str(WORKER), side, str(ckpt), "--dtype", dtype, "--patches", str(args.patches),
           "--repeats", str(args.repeats), "--threads", str(threads), "--text", TEXT, "--family", "voxcpm1"]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
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


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tools/bench.py voxcpm1", description=__doc__.split("\n\n")[0])
    parser.add_argument("--patches", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2, help="alternating upstream/ours processes per setting")
    parser.add_argument("--threads", default="1", help="comma-separated torch thread counts")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--ours-only", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--drift", action="store_true", help="measure reduced-precision drift instead (see above)")
    args = parser.parse_args(argv)
    folders = ensure_checkpoint(bench_dir())
    if args.drift:
        return drift(folders["float32"], bench_dir(), args)
    rows = []
    for dtype in args.dtypes.split(","):
        for threads in (int(t) for t in args.threads.split(",")):
            runs: dict[str, list[dict]] = {"upstream": [], "ours": []}
            for _ in range(args.rounds):
                for side in (("ours",) if args.ours_only else ("upstream", "ours")):
                    runs[side].append(run_worker(side, folders[dtype], dtype, threads, args))
            result = {"dtype": dtype, "threads": threads, **{s: merge(r) for s, r in runs.items() if r}}
            rows.append(result)
            print_row(result, args)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0


def print_row(result: dict, args: argparse.Namespace) -> None:
    print(f"\n== VoxCPM-0.5B-sized, {result['dtype']}, {result['threads']} thread(s), {args.patches} patches, "
          f"{args.rounds} processes x {args.repeats} repeats per side, text {TEXT!r}")
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
    if "upstream" in result:
        up, ours = result["upstream"], result["ours"]
        wall = statistics.median(ours["walls"]) / statistics.median(up["walls"])
        ttfa = statistics.median(ours["ttfa"]) / statistics.median(up["ttfa"])
        print(f"ratio ours/upstream: wall {wall:.2f}, first audio {ttfa:.2f}")
    sys.stdout.flush()


def drift(folder: Path, root: Path, args: argparse.Namespace) -> int:
    import importlib.util

    import numpy as np
    import torch

    from audiocpp.engine.packaging.cli import package_from_cli
    from audiocpp.engine.records import TaskRequest
    from audiocpp.families.voxcpm1 import plugin

    torch.set_num_threads(int(args.threads.split(",")[0]))
    spec = importlib.util.spec_from_file_location("voxcpm1_convert", REPO / "tools" / "voxcpm1" / "convert_voxcpm_cpp.py")
    converter = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(converter)
    paths: dict[str, tuple[Path, str]] = {}
    for kind in ("q8_0", "bf16"):
        out = root / f"voxcpm1-0.5b-real-{kind}.gguf"
        if not out.exists():
            package_from_cli(out=out, inputs=[str(folder)], spec=None, family="voxcpm1", weight_type=kind,
                             keep_types=[], overwrite=False)
        paths[f"package {kind}"] = (out, "float32")
    cpp = root / "voxcpm1-0.5b-real-voxcpm_cpp-q8_0.gguf"
    if not cpp.exists():
        converter.convert(folder, cpp, weight_type="q8_0")
    paths["VoxCPM.cpp q8_0 (VAE f16)"] = (cpp, "float32")
    paths["folder, compute bfloat16"] = (folder, "bfloat16")
    request = TaskRequest(text=TEXT, seed=7, options={"min_tokens": args.patches, "max_tokens": args.patches,
                                                      "retry_badcase": False})

    def run(path: Path, dtype: str):
        result = plugin.load(path).session("tts", compute_dtype=dtype).run(request)
        return result.details["latents"][0], result.audio.samples

    base_latents, base_audio = run(folder, "float32")
    scale = float(np.abs(base_latents).max())
    print(f"\n== drift against the float32 folder, VoxCPM-0.5B-sized random weights, {args.patches} patches "
          f"(largest latent {scale:.2f})")
    for label, (path, dtype) in paths.items():
        latents, audio = run(path, dtype)
        diff = float(np.abs(latents - base_latents).max())
        a, b = audio.astype(np.float64), base_audio.astype(np.float64)
        cos = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
        print(f"{label:28s} max latent diff {diff:.2e} ({100 * diff / scale:.2f}%), audio cosine {cos:.7f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
