"""VoxCPM2 benchmark: ours against upstream (PyPI voxcpm 2.0.3) in the same run.

    python tools/bench.py voxcpm2 [--patches 4] [--repeats 3] [--threads 1,2] [--dtypes float32,bfloat16]

A VoxCPM2-sized checkpoint with random weights (28+8 LM layers of 2048, 12+12 local layers of
1024, AudioVAE 16 kHz -> 48 kHz; reference section 2) is built once, in bf16 as the real
checkpoints are, under ``$AUDIOCPP_BENCH_DIR`` (default ``~/.cache/audiocpp-bench``; about
5 GB). Each side runs in its own process (tools/voxcpm2/bench_worker.py): load, one warm-up,
then ``--repeats`` offline runs of one fixed sentence, generating exactly ``--patches`` patches
(0.16 s of audio each; random weights never stop on their own), and ``--repeats`` streaming
runs for the time to first audio. Upstream computes in its checkpoint config's ``dtype``, ours
with the session option ``compute_dtype``; the VAE is float32 on both sides. Printed: wall
median (min..max), RTF, time to first audio, peak RSS while generating, ours/upstream ratio.

The machine's cores may be shared: the repeats and the min..max spread show the noise.

``--weights f32,bf16,q8_0``: ours only, the checkpoint packaged in each weight type and run side by
side with the default options (tools/weights_bench.py): wall, RTF, peak RSS, load time, latent and
audio drift against the first type. ``--threads`` then takes one count.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tools.voxcpm2.bench_setup import TEXT, bench_dir, dtype_folders, run_settings


def ensure_checkpoint(root: Path) -> dict[str, Path]:
    """The real-size checkpoint (bf16 weights) and one folder per upstream compute dtype."""
    from tools.voxcpm2.checkpoint import REAL_V2, write_checkpoint

    base = root / "voxcpm2-real"
    if not (base / "config.json").is_file() or not (base / "audiovae.pth").is_file():
        print(f"building the VoxCPM2-sized random checkpoint in {base} (once; ~5 GB)...", file=sys.stderr)
        import torch

        write_checkpoint(base, REAL_V2, seed=2024, dtype=torch.bfloat16)
    return dtype_folders(base)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tools/bench.py voxcpm2", description=__doc__.split("\n\n")[0])
    parser.add_argument("--patches", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1,
                        help="alternating upstream/ours processes per setting")
    parser.add_argument("--threads", default="1,2", help="comma-separated torch thread counts")
    parser.add_argument("--dtypes", help="compute dtypes of both sides on the folder (default float32, and "
                        "bfloat16 where the CPU computes it in hardware)")
    parser.add_argument("--package", help="also ours on the checkpoint packaged in this type (q8_0: the "
                        "default package mode, compute auto) against upstream float32")
    parser.add_argument("--ours-only", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--weights",
                        help="f32,bf16,q8_0: package the checkpoint in each type, run ours on each")
    parser.add_argument("--device", help="device of the --weights workers (default: auto)")
    parser.add_argument("--batch",
                        help="1,2,4,8: batched generation against sequential (tools/batch_bench.py); "
                        "--patches per request (default 16), --weights (default q8_0,f32)")
    parser.add_argument("--profile", action="store_true",
                        help="where one request's time goes, stage by stage (tools/profile_bench.py); "
                        "--patches (default 16), --weights (default f32,q8_0); "
                        "with --batch N: of N requests as one batch")
    args = parser.parse_args(argv)
    folders = ensure_checkpoint(bench_dir())
    if args.profile:
        from tools.profile_bench import Options as ProfileOptions
        from tools.profile_bench import profile_batch
        from tools.profile_bench import run as run_profile

        patches = args.patches if "--patches" in argv else 16
        run_profile("voxcpm2", folders["float32"].with_name(folders["float32"].name.removesuffix("-float32")),
                    ProfileOptions(args.weights or "f32,q8_0", 2, args.repeats, profile_batch(args.batch),
                                   ["--patches", str(patches)]))
        return 0
    if args.batch:
        from tools.batch_bench import Options as BatchOptions
        from tools.batch_bench import run as run_batch

        patches = args.patches if "--patches" in argv else 16
        run_batch("voxcpm2", folders["float32"].with_name(folders["float32"].name.removesuffix("-float32")),
                  BatchOptions(args.batch, args.weights or "q8_0,f32", 2, ["--patches", str(patches)]))
        return 0
    if args.weights:
        from tools.weights_bench import Options, run

        run("voxcpm2", folders["float32"].with_name("voxcpm2-real"), Options(
            args.weights, args.repeats, int(args.threads.split(",")[0]), ["--patches", str(args.patches)],
            args.device, args.json))
        return 0
    run_settings(args, folders, "voxcpm2", lambda r: (
        f"VoxCPM2-sized, {r['dtype']}, {r['threads']} thread(s), {args.patches} patches, "
        f"{args.rounds} processes x {args.repeats} repeats per side, text {TEXT!r}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
