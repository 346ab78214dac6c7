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

from tools.bench_common import bench_dir, cosine
from tools.bench_requests import request_options
from tools.bench_sides import thread_counts
from tools.voxcpm2 import bench_setup


def ensure_checkpoint(root: Path) -> Path:
    """The 0.5B-size checkpoint (bf16 weights as the real one), built once."""
    def write(base: Path) -> None:
        import torch

        from tools.voxcpm1.checkpoint import REAL_05B, write_v1_checkpoint

        write_v1_checkpoint(base, REAL_05B, seed=2025, weights="bin", dtype=torch.bfloat16)

    return bench_setup.ensure_checkpoint(root / "voxcpm1-0.5b-real", "VoxCPM-0.5B-sized (~1.4 GB)", write)


def main(argv: list[str]) -> int:
    return bench_setup.main(argv, "voxcpm1", __doc__, ensure_checkpoint, "VoxCPM-0.5B-sized", drift,
                            patches=8, rounds=2, threads="1")


def drift(folder: Path, args: argparse.Namespace) -> int:
    """The drift of the faster paths against the float32 ``folder`` (see above)."""
    import numpy as np
    import torch

    from audiocpp.engine.packaging.cli import package_from_cli
    from audiocpp.engine.records import TaskRequest
    from audiocpp.families.voxcpm1 import plugin
    from tools.voxcpm1 import convert_voxcpm_cpp as converter

    torch.set_num_threads(thread_counts(args.threads)[0])
    paths: dict[str, tuple[Path, str]] = {}
    for kind in ("q8_0", "bf16"):
        out = bench_dir() / f"voxcpm1-0.5b-real-{kind}.gguf"
        if not out.exists():
            package_from_cli(out=out, inputs=[str(folder)], spec=None, family="voxcpm1", weight_type=kind,
                             keep_types=[], overwrite=False)
        paths[f"package {kind}"] = (out, "float32")
    cpp = bench_dir() / "voxcpm1-0.5b-real-voxcpm_cpp-q8_0.gguf"
    if not cpp.exists():
        converter.convert(folder, cpp, weight_type="q8_0")
    paths["VoxCPM.cpp q8_0 (VAE f16)"] = (cpp, "float32")
    paths["folder, compute bfloat16"] = (folder, "bfloat16")
    options = request_options("voxcpm1", patches=args.patches)
    request = TaskRequest(text=bench_setup.TEXT, seed=7, options=options)

    def synthesize(path: Path, dtype: str):
        result = plugin.load(path).session("tts", compute_dtype=dtype).run(request)
        return result.details["latents"][0], result.audio.samples

    base_latents, base_audio = synthesize(folder, "float32")
    scale = float(np.abs(base_latents).max())
    print(f"\n== drift against the float32 folder, VoxCPM-0.5B-sized random weights, {args.patches} patches "
          f"(largest latent {scale:.2f})")
    for label, (path, dtype) in paths.items():
        latents, audio = synthesize(path, dtype)
        diff = float(np.abs(latents - base_latents).max())
        print(f"{label:28s} max latent diff {diff:.2e} ({100 * diff / scale:.2f}%), "
              f"audio cosine {cosine(audio, base_audio):.7f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
