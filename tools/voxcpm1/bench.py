"""VoxCPM1 benchmark: ours against upstream (PyPI voxcpm 2.0.3) in the same run, at VoxCPM-0.5B size.

    python tools/bench.py voxcpm1 [--patches 8] [--repeats 3] [--rounds 2] [--threads 1]
                                  [--dtypes float32,bfloat16]

A checkpoint of VoxCPM-0.5B's dimensions with random weights (24+6 LM layers of 1024, local
encoder / DiT 4 layers of 1024, patch 2, AudioVAE 16 kHz; tools/voxcpm1/checkpoint.py REAL_05B)
is built once, in bf16 as ``pytorch_model.bin`` like the real one, under ``$AUDIOCPP_BENCH_DIR``
(default ``~/.cache/audiocpp-bench``; about 1.4 GB). Each side runs in its own process
(tools/voxcpm2/bench_worker.py, shared with the VoxCPM2 benchmark): load, one warm-up, then
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
import sys
from pathlib import Path

from tools.voxcpm2.bench_setup import TEXT, bench_dir, dtype_folders, run_settings


def ensure_checkpoint(root: Path) -> dict[str, Path]:
    """The 0.5B-size checkpoint (bf16 weights) and one folder per upstream compute dtype."""
    base = root / "voxcpm1-0.5b-real"
    if not (base / "config.json").is_file() or not (base / "audiovae.pth").is_file():
        print(f"building the VoxCPM-0.5B-sized random checkpoint in {base} (once; ~1.4 GB)...",
              file=sys.stderr)
        import torch

        from tools.voxcpm1.checkpoint import REAL_05B, write_v1_checkpoint

        write_v1_checkpoint(base, REAL_05B, seed=2025, weights="bin", dtype=torch.bfloat16)
    return dtype_folders(base)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tools/bench.py voxcpm1", description=__doc__.split("\n\n")[0])
    parser.add_argument("--patches", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2,
                        help="alternating upstream/ours processes per setting")
    parser.add_argument("--threads", default="1", help="comma-separated torch thread counts")
    parser.add_argument("--dtypes", help="compute dtypes of both sides on the folder (default float32, and "
                        "bfloat16 where the CPU computes it in hardware)")
    parser.add_argument("--package", help="also ours on the checkpoint packaged in this type (q8_0: the "
                        "default package mode, compute auto) against upstream float32")
    parser.add_argument("--ours-only", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--drift", action="store_true",
                        help="measure reduced-precision drift instead (see above)")
    parser.add_argument("--weights", help="with --batch: the weight types (default q8_0,f32)")
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
        run_profile("voxcpm1", folders["float32"].with_name(folders["float32"].name.removesuffix("-float32")),
                    ProfileOptions(args.weights or "f32,q8_0", 2, args.repeats, profile_batch(args.batch),
                                   ["--patches", str(patches)]))
        return 0
    if args.batch:
        from tools.batch_bench import Options as BatchOptions
        from tools.batch_bench import run as run_batch

        patches = args.patches if "--patches" in argv else 16
        run_batch("voxcpm1", folders["float32"].with_name(folders["float32"].name.removesuffix("-float32")),
                  BatchOptions(args.batch, args.weights or "q8_0,f32", 2, ["--patches", str(patches)]))
        return 0
    if args.drift:
        return drift(folders["float32"], bench_dir(), args)
    run_settings(args, folders, "voxcpm1", lambda r: (
        f"VoxCPM-0.5B-sized, {r['dtype']}, {r['threads']} thread(s), {args.patches} patches, "
        f"{args.rounds} processes x {args.repeats} repeats per side, text {TEXT!r}"))
    return 0


def drift(folder: Path, root: Path, args: argparse.Namespace) -> int:
    import numpy as np
    import torch

    from audiocpp.engine.packaging.cli import package_from_cli
    from audiocpp.engine.records import TaskRequest
    from audiocpp.families.voxcpm1 import plugin
    from tools.voxcpm1 import convert_voxcpm_cpp as converter

    torch.set_num_threads(int(args.threads.split(",")[0]))
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
