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
with upstream's float32). ``--rounds`` alternates the processes (upstream, ours in each dtype) that
many times, so a busy spell of the shared machine hits every side. Printed: wall median (min..max),
RTF, first audio, peak RSS while generating, load time, and the ratio ours/upstream.

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
import subprocess
import sys
from functools import partial
from pathlib import Path

from tools import bench_sides as sides
from tools.bench_common import bench_dir, require, worker_env, write_json

WORKER = sides.Worker(Path(__file__).resolve().with_name("bench_worker.py"), "audio8")
TEXT = "The quick brown fox jumps over the lazy dog."


def ensure_checkpoint(root: Path, upstream: Path) -> Path:
    folder = root / "audio8-real"
    if not all((folder / f).is_file()
               for f in ("config.json", "model.safetensors", "codec.pth", "tokenizer.json")):
        print(f"building the Audio8-0.6B-sized random checkpoint in {folder} (once; ~2.7 GB)...",
              file=sys.stderr)
        python = WORKER.upstream_python
        require(python, WORKER.upstream_fix)
        script = WORKER.script.with_name("checkpoint.py")
        subprocess.run([str(python), str(script), str(folder), "--size", "real", "--upstream", str(upstream)],
                       check=True, env=worker_env())
    return folder


def worker(args: argparse.Namespace, folder: Path, side: str, dtype: str, threads: int) -> dict:
    return WORKER.run(side, str(folder), "--dtype", dtype, "--frames", str(args.frames), "--repeats",
                      str(args.repeats), "--threads", str(threads), "--text", TEXT,
                      "--upstream", str(args.upstream))


def codes_note(ours: dict, upstream: dict) -> str:
    return f"; codes {'identical' if ours['codes'] == upstream['codes'] else 'DIFFERENT'}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tools/bench.py audio8_tts", description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=16)
    sides.add_round_options(parser, repeats=2, rounds=1, threads="2")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--upstream", type=Path, default=Path("/work/upstream/audio8"),
                        help="Audio8_TTS checkout")
    sides.add_output_options(parser)
    sides.add_mode_options(parser, size="--frames", default=48)
    parser.add_argument("--backbone", choices=["qwen", "falcon_h1"], default="qwen",
                        help="with --batch / --profile: the 0.6B (qwen) or the 0.1B (falcon_h1) slow AR")
    parser.add_argument("--codec-dtype", choices=["float32", "bfloat16"], default="float32",
                        help="with --batch / --profile: the session option codec_dtype")
    args = parser.parse_args(argv)
    folder = ensure_checkpoint(bench_dir(), args.upstream)
    label = "audio8_tts"
    if (args.batch or args.profile) and args.backbone == "falcon_h1":
        from tools.audio8_tts.bench_falcon import write_pipeline_folder

        folder, label = write_pipeline_folder(bench_dir() / "audio8-0.1b-real", folder), "audio8_tts-0.1b"
    if sides.run_modes(args, "audio8_tts", folder, size=["--frames", str(args.frames)],
                       long_size=sides.size_or(argv, "--frames", args.frames, 48),
                       threads=sides.thread_counts(args.threads)[0], label=label,
                       session=["--session-option", f"codec_dtype={args.codec_dtype}"]):
        return 0
    results = []
    dtypes = args.dtypes.split(",")
    for threads in sides.thread_counts(args.threads):
        # upstream (float32 only) and ours in each dtype take turns; each dtype's table against the same
        # upstream processes
        runs = {"upstream": partial(worker, args, folder, "upstream", "float32", threads)}
        for dtype in dtypes:
            runs[f"ours {dtype}"] = partial(worker, args, folder, "ours", dtype, threads)
        if args.ours_only:
            del runs["upstream"]
        merged = sides.alternate_merged(runs, args.rounds)
        for dtype in dtypes:
            rows = {"upstream": merged["upstream"]} if "upstream" in merged else {}
            rows["ours"] = merged[f"ours {dtype}"]
            results.append({"threads": threads, "dtype": dtype, **rows})
            sides.print_sides(f"Audio8-0.6B-sized + real codec, ours {dtype} vs upstream float32, "
                              f"{threads} thread(s), {args.frames} frames, {args.rounds} process(es) "
                              f"x {args.repeats} repeats, text {TEXT!r}", rows,
                              extra=("frames codes", lambda r: f"{r['frames']:6d} {r['codes']}"),
                              note=codes_note)
    write_json(args.json, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
