"""Print the VoxCPM1 parity figures: per case of tests/voxcpm1/cases.py, patch counts (ours /
upstream incl. its context patches), attempts, the max latent difference to upstream and the
audio cosine, with the default oneDNN-packed kernels and with ``packed_linear=false``; then the
VAE round trips. The tests assert the bounds, this prints the numbers.

    .venv/bin/python tools/voxcpm1/parity_report.py [WORKDIR]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.voxcpm1.cases import (  # noqa: E402
    CASES,
    compare,
    cosine,
    reference_cases,
    run_ours,
    write_audio,
    write_checkpoints,
)


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path(tempfile.mkdtemp(prefix="voxcpm1-parity-"))
    root.mkdir(parents=True, exist_ok=True)
    ckpts = write_checkpoints(root / "ckpt")
    audio = write_audio(root / "audio")
    spec = {"checkpoints": {k: str(v) for k, v in ckpts.items()}, "cases": reference_cases(audio), "threads": 1}
    (root / "cases.json").write_text(json.dumps(spec), encoding="utf-8")
    proc = subprocess.run([str(REPO / ".ref-envs/voxcpm/bin/python"), str(REPO / "tools/voxcpm/reference_v2.py"),
                           str(root / "cases.json"), str(root / "out")], capture_output=True, text=True)
    if proc.returncode:
        print(proc.stderr[-3000:], file=sys.stderr)
        return 1
    torch.set_num_threads(1)
    from audiocpp.families.voxcpm1 import plugin

    models = {(name, packed): plugin.load(path, {"packed_linear": packed})
              for name, path in ckpts.items() for packed in (True, False)}
    print(f"{'case':32s} {'patches':>9s} {'ctx':>3s} {'attempts':>8s} {'latent diff':>12s} {'(unpacked)':>11s} "
          f"{'audio cos':>11s}")
    for case in CASES:
        ref = dict(np.load(root / "out" / f"{case.name.replace(':', '__')}.npz"))
        figs = [compare(case, *run_ours(models[case.checkpoint, packed], case, audio), ref) for packed in (True, False)]
        f = figs[0]
        print(f"{case.name:32s} {f['patches']:4d}/{f['upstream_patches']:<4d} {f['context']:3d} "
              f"{f['attempts']:4d}/{f['upstream_attempts']:<3d} {f['latent_diff']:12.2e} {figs[1]['latent_diff']:11.2e} "
              f"{f['cosine']:11.8f}")
    for name, wav in (("tiny_05b", "vae16k"), ("tiny_15", "vae44k")):
        import soundfile as sf

        ref = dict(np.load(root / "out" / f"{name}__vae.npz"))
        vae = models[name, True].parts.vae
        samples, _ = sf.read(audio[wav], dtype="float32")
        z = vae.encode(torch.from_numpy(samples).reshape(1, 1, -1))[0].numpy()
        y = vae.decode(torch.from_numpy(ref["latents"]).unsqueeze(0))[0, 0].numpy()
        print(f"{name} VAE: encode max diff {np.abs(z - ref['latents']).max():.2e}, decode max diff "
              f"{np.abs(y - ref['audio']).max():.2e}, cosine {cosine(y, ref['audio']):.8f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
