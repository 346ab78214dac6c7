"""Audio8 TTS benchmark: ours against upstream (Audio8_TTS@14468db) in the same run.

    python tools/bench.py audio8_tts [--frames 16] [--repeats 2] [--rounds 1] [--threads 2]
                                     [--dtypes float32,bfloat16] [--upstream PATH] [--json OUT]

A checkpoint with the real 0.6B dims and the real codec (16/8-head post_module, FFN 1216) and
random weights is built once by the upstream classes (tools/audio8_tts/checkpoint.py --size real,
in .ref-envs/audio8) under ``$AUDIOCPP_BENCH_DIR`` (default ``~/.cache/audiocpp-bench``; ~2.7 GB).
Each side runs in its own process (tools/audio8_tts/bench_worker.py): load, one warm-up, then
``--repeats`` offline runs of one fixed sentence (``--frames`` frames, same seed: both sides must
give the same codes) and ``--repeats`` streaming runs for the time to first audio (ours decodes
frame by frame; upstream has no streaming, so its first audio is its whole offline run).
Upstream runs in float32 only (it refuses other dtypes on CPU); ours also in bfloat16 (compared
with upstream's float32). Printed: wall median (min..max), RTF, first audio, peak RSS while
generating, load time, and the ratio ours/upstream.

The machine's cores may be shared: the repeats and the min..max spread show the noise.

``--batch 1,2,4,8 [--backbone qwen|falcon_h1] [--frames 48]``: batched generation against the same
requests one after another, for the 0.6B or the 0.1B (tools/batch_bench.py).

``--profile [--backbone ...] [--frames 48]``: where one request's time goes, stage by stage, in float32
and Q8_0, against the machine's GEMM rate and bandwidth (tools/profile_bench.py).

``--weights f32,bf16,q8_0``: ours only, the checkpoint packaged in each weight type and run side by
side with the default options (tools/weights_bench.py): wall, RTF, peak RSS, load time, code and
audio drift against the first type. ``--threads`` then takes one count.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from tools.bench_common import bench_dir, merge, require, run_worker_process, spread, worker_env

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).resolve().with_name("bench_worker.py")
OURS_PY = REPO / ".venv" / "bin" / "python"
UPSTREAM_PY = REPO / ".ref-envs" / "audio8" / "bin" / "python"
TEXT = "The quick brown fox jumps over the lazy dog."


def ensure_checkpoint(root: Path, upstream: Path) -> Path:
    folder = root / "audio8-real"
    if not all((folder / f).is_file()
               for f in ("config.json", "model.safetensors", "codec.pth", "tokenizer.json")):
        print(f"building the Audio8-0.6B-sized random checkpoint in {folder} (once; ~2.7 GB)...",
              file=sys.stderr)
        require(UPSTREAM_PY, "tools/reference_envs/audio8.sh")
        subprocess.run([str(UPSTREAM_PY), str(WORKER.with_name("checkpoint.py")), str(folder),
                        "--size", "real", "--upstream", str(upstream)], check=True, env=worker_env())
    return folder


def run_worker(side: str, ckpt: Path, dtype: str, threads: int, args: argparse.Namespace) -> dict:
    python = OURS_PY if side == "ours" else UPSTREAM_PY
    require(python, "tools/setup_env.sh" if side == "ours" else "tools/reference_envs/audio8.sh")
    cmd = [str(python), str(WORKER), side, str(ckpt), "--dtype", dtype, "--frames", str(args.frames),
           "--repeats", str(args.repeats), "--threads", str(threads), "--text", TEXT,
           "--upstream", str(args.upstream)]
    return run_worker_process(cmd, side)


def print_row(title: str, rows: dict[str, dict]) -> None:
    print(f"\n== {title}")
    print(f"{'side':9s} {'wall median (min..max)':28s} {'RTF':>7s} {'first audio':28s} {'peak RSS gen':>13s} "
          f"{'load':>8s}  frames codes")
    for side, r in rows.items():
        rtf = statistics.median(r["walls"]) / r["audio_s"] if r["audio_s"] else float("nan")
        rss = f"{r['peak_rss_gen_mb'] / 1024:.2f} GiB" if r.get("peak_rss_gen_mb") else "n/a"
        print(f"{side:9s} {spread(r['walls']):28s} {rtf:7.2f} {spread(r['ttfa']):28s} {rss:>13s} "
              f"{r['load_s']:6.1f} s  {r['frames']:6d} {r['codes']}")
    if "upstream" in rows and "ours" in rows:
        up, ours = rows["upstream"], rows["ours"]
        wall = statistics.median(ours["walls"]) / statistics.median(up["walls"])
        ttfa = statistics.median(ours["ttfa"]) / statistics.median(up["ttfa"])
        same = "identical" if ours["codes"] == up["codes"] else "DIFFERENT"
        print(f"ratio ours/upstream: wall {wall:.2f}, first audio {ttfa:.2f}; codes {same}")
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tools/bench.py audio8_tts", description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1,
                        help="alternating upstream/ours processes per setting")
    parser.add_argument("--threads", default="2", help="comma-separated torch thread counts")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--upstream", type=Path, default=Path("/work/upstream/audio8"),
                        help="Audio8_TTS checkout")
    parser.add_argument("--ours-only", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--weights",
                        help="f32,bf16,q8_0: package the checkpoint in each type, run ours on each")
    parser.add_argument("--device", help="device of the --weights workers (default: auto)")
    parser.add_argument("--batch",
                        help="1,2,4,8: batched generation against sequential (tools/batch_bench.py); "
                        "--frames per request (default 48), --weights (default q8_0,f32)")
    parser.add_argument("--backbone", choices=["qwen", "falcon_h1"], default="qwen",
                        help="with --batch / --profile: the 0.6B (qwen) or the 0.1B (falcon_h1) slow AR")
    parser.add_argument("--codec-dtype", choices=["float32", "bfloat16"], default="float32",
                        help="with --batch / --profile: the session option codec_dtype")
    parser.add_argument("--profile", action="store_true",
                        help="where one request's time goes, stage by stage (tools/profile_bench.py); "
                        "--frames (default 48), --weights (default f32,q8_0); "
                        "with --batch N: of N requests as one batch")
    args = parser.parse_args(argv)
    folder = ensure_checkpoint(bench_dir(), args.upstream)
    label = "audio8_tts"
    if (args.batch or args.profile) and args.backbone == "falcon_h1":
        from tools.audio8_tts.bench_falcon import write_pipeline_folder

        folder, label = write_pipeline_folder(bench_dir() / "audio8-0.1b-real", folder), "audio8_tts-0.1b"
    codec_option = ["--session-option", f"codec_dtype={args.codec_dtype}"]
    if args.profile:
        from tools.profile_bench import Options as ProfileOptions
        from tools.profile_bench import profile_batch
        from tools.profile_bench import run as run_profile

        frames = args.frames if "--frames" in argv else 48
        opts = ProfileOptions(args.weights or "f32,q8_0", int(args.threads.split(",")[0]), args.repeats,
                              profile_batch(args.batch), ["--frames", str(frames), *codec_option])
        run_profile("audio8_tts", folder, opts, label=label)
        return 0
    if args.batch:
        from tools.batch_bench import Options as BatchOptions
        from tools.batch_bench import run as run_batch

        frames = args.frames if "--frames" in argv else 48
        run_batch("audio8_tts", folder, BatchOptions(args.batch, args.weights or "q8_0,f32",
                                                     int(args.threads.split(",")[0]),
                                                     ["--frames", str(frames), *codec_option]),
                  label=label)
        return 0
    if args.weights:
        from tools.weights_bench import Options, run

        run("audio8_tts", folder, Options(args.weights, args.repeats, int(args.threads.split(",")[0]),
                                          ["--frames", str(args.frames)], args.device, args.json))
        return 0
    results = []
    for threads in (int(t) for t in args.threads.split(",")):
        upstream_runs: list[dict] = []
        if not args.ours_only:
            upstream_runs = [run_worker("upstream", folder, "float32", threads, args)
                             for _ in range(args.rounds)]
        for dtype in args.dtypes.split(","):
            ours = merge([run_worker("ours", folder, dtype, threads, args) for _ in range(args.rounds)])
            rows = {"upstream": merge(upstream_runs), "ours": ours} if upstream_runs else {"ours": ours}
            results.append({"threads": threads, "dtype": dtype, **rows})
            print_row(f"Audio8-0.6B-sized + real codec, ours {dtype} vs upstream float32, "
                      f"{threads} thread(s), {args.frames} frames, {args.rounds} process(es) "
                      f"x {args.repeats} repeats, text {TEXT!r}", rows)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
