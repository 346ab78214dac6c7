"""Print the VoxCPM1 parity figures: per case of tests/voxcpm1/cases.py, patch counts (ours /
upstream incl. its context patches), attempts, the max latent difference to upstream and the
audio cosine, with the default oneDNN-packed kernels and with ``packed_linear=false``; then the
VAE round trips; then every load path against the HF folder (our packages, VoxCPM.cpp GGUFs in
each storage) and bfloat16 compute. The tests assert the bounds, this prints the numbers.

    .venv/bin/python tools/voxcpm1/parity_report.py [WORKDIR]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: tools/ and tests/ are packages of the repository root
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
from tools.voxcpm2.parity_report import run_upstream  # noqa: E402


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path(tempfile.mkdtemp(prefix="voxcpm1-parity-"))
    root.mkdir(parents=True, exist_ok=True)
    ckpts = write_checkpoints(root / "ckpt")
    audio = write_audio(root / "audio")
    spec = {"checkpoints": {k: str(v) for k, v in ckpts.items()}, "cases": reference_cases(audio),
            "threads": 1}
    run_upstream(root, spec)
    torch.set_num_threads(1)
    from audiocpp.families.voxcpm1 import plugin

    models = {(name, packed): plugin.load(path, {"packed_linear": packed})
              for name, path in ckpts.items() for packed in (True, False)}
    print(f"{'case':32s} {'patches':>9s} {'ctx':>3s} {'attempts':>8s} {'latent diff':>12s} "
          f"{'(unpacked)':>11s} {'audio cos':>11s}")
    for case in CASES:
        ref = dict(np.load(root / "out" / f"{case.name.replace(':', '__')}.npz"))
        figs = [compare(case, *run_ours(models[case.checkpoint, packed], case, audio), ref)
                for packed in (True, False)]
        f = figs[0]
        print(f"{case.name:32s} {f['patches']:4d}/{f['upstream_patches']:<4d} {f['context']:3d} "
              f"{f['attempts']:4d}/{f['upstream_attempts']:<3d} {f['latent_diff']:12.2e} "
              f"{figs[1]['latent_diff']:11.2e} {f['cosine']:11.8f}")
    for name, wav in (("tiny_05b", "vae16k"), ("tiny_15", "vae44k")):
        import soundfile as sf

        ref = dict(np.load(root / "out" / f"{name}__vae.npz"))
        vae = models[name, True].parts.codec
        samples, _ = sf.read(audio[wav], dtype="float32")
        z = vae.encode(torch.from_numpy(samples).reshape(1, 1, -1))[0].numpy()
        y = vae.decode(torch.from_numpy(ref["latents"]).unsqueeze(0))[0, 0].numpy()
        print(f"{name} VAE: encode max diff {np.abs(z - ref['latents']).max():.2e}, decode max diff "
              f"{np.abs(y - ref['audio']).max():.2e}, cosine {cosine(y, ref['audio']):.8f}")
    load_paths(root, ckpts, audio, models)
    return 0


def load_paths(root: Path, ckpts: dict[str, Path], audio: dict[str, Path], models: dict) -> None:
    """Each layout of the same weights against the folder: max latent difference, audio cosine."""
    from audiocpp.engine.packaging.cli import package_from_cli
    from audiocpp.families.voxcpm1 import plugin
    from tests.voxcpm1.cases import CASE_BY_NAME
    from tools.voxcpm1.convert_voxcpm_cpp import convert
    print(f"\n{'variant':9s} {'layout':34s} {'case':16s} {'patches':>8s} {'latent diff':>12s} "
          f"{'audio cos':>11s}")
    for ck, path in ckpts.items():
        layouts: dict[str, tuple[Path, dict]] = {}
        for kind in ("f32", "bf16", "f16", "q8_0"):
            out = root / f"{ck}-package-{kind}.gguf"
            if not out.exists():
                package_from_cli(out=out, inputs=[str(path)], spec=None, family="voxcpm1", weight_type=kind,
                                 keep_types=[], overwrite=False)
            layouts[f"package {kind}"] = (out, {})
        for label, options in (("voxcpm.cpp f32", {}), ("voxcpm.cpp f32 2-D convs", {"conv_layout": "2d"}),
                               ("voxcpm.cpp f32 fold g*v/(|v|+1e-12)", {"fold_with": "voxcpm_cpp"}),
                               ("voxcpm.cpp f16", {"weight_type": "f16"}),
                               ("voxcpm.cpp q8_0 (VAE f16)", {"weight_type": "q8_0"}),
                               ("voxcpm.cpp q8_0 (VAE q8_0 2-D)",
                                {"weight_type": "q8_0", "vae_type": "q8_0"})):
            out = root / f"{ck}-cpp-{len(layouts)}.gguf"
            layouts[label] = (convert(path, out, **options), {})
        layouts["folder, compute bfloat16"] = (path, {"compute_dtype": "bfloat16"})
        for case_name in ("clone", "tts_seed7_steps5"):
            case = CASE_BY_NAME[f"{ck}:{case_name}"]
            base, _ = run_ours(models[ck, True], case, audio)
            for label, (where, session_options) in layouts.items():
                model = plugin.load(where)
                session = model.session(case.task, **session_options)
                result = session.run(case.request(audio))
                a, b = base.details["latents"][0], result.details["latents"][0]
                diff = float(np.abs(a - b).max()) if a.shape == b.shape else float("nan")
                cos = cosine(base.audio.samples, result.audio.samples) if a.shape == b.shape else float("nan")
                print(f"{ck:9s} {label:34s} {case_name:16s} {len(b):4d}/{len(a):<3d} {diff:12.2e} "
                      f"{cos:11.8f}")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
