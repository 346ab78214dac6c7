#!/usr/bin/env python3
"""What the ISA level changes: one package, one seeded request, run at each ISA level in its own
process (the environment of ``engine.nn.kernels.cpu_isa.LEVEL_ENV``: our kernels' level and torch's, oneDNN's
and MKL's) and in each compute mode, then every result compared with the first: the same audio bit
for bit, or how far apart (largest difference, cosine) and how many tokens / codes are the same.

    python tools/isa_drift.py FAMILY PACKAGE [--levels avx2,avx512] [--modes float32-stored,auto]
           [--duration 5 --steps 16] [--patches 16] [--frames 48] [--threads 2]

``auto`` is each level's own default (float32-stored where bfloat16 is emulated, bfloat16 where the
CPU has it). Our kernels give the same bits on every level (tests/kernels); what can still differ is
torch's own arithmetic at each level (MKL's and oneDNN's GEMMs block their sums per ISA) and the
compute mode. The figures are in docs/numerics.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script
    sys.path.insert(0, str(REPO))
from tools.batch_worker import add_request_size, outputs, requests  # noqa: E402


def worker(args: argparse.Namespace) -> int:
    """Run the request once in this process and save its audio and outputs."""
    import numpy as np
    import torch

    from audiocpp.engine.nn.kernels.cpu_isa import level
    from audiocpp.engine.registry import get_family

    torch.set_num_threads(args.threads)
    model = get_family(args.family).load(args.package)
    session = model.session("tts", compute_dtype=args.mode)
    result = session.run(requests(args.family, 1, args)[0])
    np.savez(args.save, audio=np.asarray(result.audio.samples, dtype=np.float32),
             outputs=np.asarray(outputs(args.family, result)))
    mode = session.compute.name if hasattr(session, "compute") else args.mode
    print(json.dumps({"level": level(), "mode": mode}))
    return 0


def run_at(level: str, mode: str, save: Path, args: argparse.Namespace) -> dict:
    from audiocpp.engine.nn.kernels import cpu_isa

    limits = ("AUDIOCPP_CPU_ISA", "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")
    env = {k: v for k, v in os.environ.items() if k not in limits}
    env.update(cpu_isa.LEVEL_ENV.get(level, {cpu_isa.CAP_ENV: level}))
    cmd = [sys.executable, __file__, args.family, str(args.package), "--worker", "--mode", mode,
           "--save", str(save), "--threads", str(args.threads), "--duration", str(args.duration),
           "--steps", str(args.steps), "--patches", str(args.patches), "--frames", str(args.frames)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{level} {mode} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def compare(base: Path, other: Path) -> str:
    import numpy as np

    a, b = np.load(base), np.load(other)
    if np.array_equal(a["audio"], b["audio"]) and np.array_equal(a["outputs"], b["outputs"]):
        return "the same bits"
    x, y = a["audio"].astype(np.float64), b["audio"].astype(np.float64)
    n = min(len(x), len(y))
    cosine = float(x[:n] @ y[:n] / max(1e-30, np.linalg.norm(x[:n]) * np.linalg.norm(y[:n])))
    oa, ob = a["outputs"], b["outputs"]
    if oa.dtype.kind in "iu" and oa.shape == ob.shape:
        same = f"tokens/codes {float((oa == ob).mean()):.1%} equal"
    elif oa.shape == ob.shape:
        scale = float(np.abs(oa).max()) or 1.0
        same = f"latents max diff {float(np.abs(oa - ob).max()) / scale:.2e} of the largest"
    else:
        same = f"outputs of other shapes {oa.shape} / {ob.shape}"
    return f"audio max diff {float(np.abs(x[:n] - y[:n]).max()):.2e}, cosine {cosine:.7f}; {same}"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("family")
    ap.add_argument("package", type=Path)
    ap.add_argument("--levels", default="avx2,avx512")
    ap.add_argument("--modes", default="float32-stored,auto")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="auto", help=argparse.SUPPRESS)
    ap.add_argument("--save", type=Path, help=argparse.SUPPRESS)
    add_request_size(ap)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)
    work = Path(tempfile.mkdtemp(prefix="isa-drift-"))
    runs = []
    for level in args.levels.split(","):
        for mode in args.modes.split(","):
            save = work / f"{level}-{mode}.npz"
            info = run_at(level, mode, save, args)
            runs.append((f"{level} {mode} ({info['mode']})", save))
            print(f"{runs[-1][0]:40s} {'(the baseline)' if len(runs) == 1 else compare(runs[0][1], save)}",
                  flush=True)
    for path in work.iterdir():
        path.unlink()
    work.rmdir()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
