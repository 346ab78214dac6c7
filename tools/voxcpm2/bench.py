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

import sys
from pathlib import Path

from tools.voxcpm2 import bench_setup


def ensure_checkpoint(root: Path) -> Path:
    """The real-size checkpoint (bf16 weights as the real ones), built once."""
    def write(base: Path) -> None:
        import torch

        from tools.voxcpm2.checkpoint import REAL_V2, write_checkpoint

        write_checkpoint(base, REAL_V2, seed=2024, dtype=torch.bfloat16)

    return bench_setup.ensure_checkpoint(root / "voxcpm2-real", "VoxCPM2-sized (~5 GB)", write)


def main(argv: list[str]) -> int:
    return bench_setup.main(argv, "voxcpm2", __doc__, ensure_checkpoint, "VoxCPM2-sized", patches=4, rounds=1,
                            threads="1,2")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
