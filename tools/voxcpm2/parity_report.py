"""Print the VoxCPM2 parity figures: per case, the max latent difference to upstream, the patch
counts, the attempts and the audio cosine, with our default kernels and with
the load option ``packed_linear=false``. The same cases as tests/voxcpm2 (tests/voxcpm2/cases.py); the tests
assert the bounds, this prints the numbers.

    .venv/bin/python tools/voxcpm2/parity_report.py [WORKDIR]
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf
import torch

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: tools/ and tests/ are packages of the repository root
    sys.path.insert(0, str(REPO))

from tests.support import run_reference, voice_like_signal  # noqa: E402
from tests.voxcpm2.cases import BF16_CASES, CASES, V1_CASES  # noqa: E402
from tools.voxcpm2.checkpoint import TINY_V1, TINY_V2, TINY_V2_MUP, write_checkpoint  # noqa: E402


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def run_upstream(root: Path, spec: dict) -> dict:
    """Upstream's results for ``spec`` (reference.py in .ref-envs/voxcpm) under ``root/out``."""
    (root / "cases.json").write_text(json.dumps(spec), encoding="utf-8")
    return run_reference("voxcpm", Path(__file__).with_name("reference.py"), root / "cases.json",
                         root / "out")


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path(tempfile.mkdtemp(prefix="voxcpm2-parity-"))
    root.mkdir(parents=True, exist_ok=True)
    ckpts = {
        "tiny": write_checkpoint(root / "tiny", TINY_V2, seed=1234),
        "tiny_mup": write_checkpoint(root / "tiny_mup", TINY_V2_MUP, seed=4321),
        "tiny_bf16": write_checkpoint(root / "tiny_bf16", {**TINY_V2, "dtype": "bfloat16"}, seed=1234,
                                      dtype=torch.bfloat16),
        "tiny_v1": write_checkpoint(root / "tiny_v1", TINY_V1, seed=99),
    }
    audio = {"ref": root / "ref.wav", "prompt": root / "prompt.wav"}
    sf.write(audio["ref"], voice_like_signal(1, 1234, 16000), 16000, subtype="FLOAT")
    sf.write(audio["prompt"], voice_like_signal(2, 1001, 16000), 16000, subtype="FLOAT")
    cases = CASES + BF16_CASES + V1_CASES
    spec = {"checkpoints": {k: str(v) for k, v in ckpts.items()}, "threads": 1,
            "cases": [{"name": c.name, "checkpoint": c.checkpoint, "kind": "generate", "seed": c.seed,
                       "streaming": c.streaming, "args": c.upstream_args(audio)} for c in cases]}
    run_upstream(root, spec)
    torch.set_num_threads(1)
    from audiocpp.engine.records import TaskRequest, VoiceReference
    from audiocpp.families.voxcpm2 import plugin
    from audiocpp.families.voxcpm2.session import VoxCPM2LoadedModel
    from audiocpp.families.voxcpm2.weights import load_parts

    models = {}
    for name, path in ckpts.items():
        for packed in (True, False):
            if name == "tiny_v1":
                options = {"packed_linear": packed}
                parts = load_parts(path, options, spec=plugin.spec, expect_architecture="voxcpm")
                models[name, packed] = VoxCPM2LoadedModel(plugin.spec, path, options, parts)
            else:
                models[name, packed] = plugin.load(path, {"packed_linear": packed})
    print(f"{'case':20s} {'patches':>9s} {'attempts':>8s} {'latent diff':>12s} {'(unpacked)':>11s} "
          f"{'audio cos':>12s}")
    for case in cases:
        ref = dict(np.load(root / "out" / f"{case.name}.npz"))
        figures = []
        for packed in (True, False):
            session = models[case.checkpoint, packed].session(
                case.task, "streaming" if case.streaming else "offline", compute_dtype=case.compute_dtype)
            voice = VoiceReference(path=audio[case.reference]) if case.reference else None
            result = session.run(TaskRequest(text=case.text, seed=case.seed, voice=voice,
                                             options=case.our_options(audio)))
            latents = result.details["latents"][0]
            expected = ref["patches"][len(ref["patches"]) - len(latents):]
            figures.append((latents, result, float(np.abs(latents - expected).max())))
        latents, result, diff = figures[0]
        wav = ref["wav"]
        if case.streaming and case.prompt and case.checkpoint != "tiny_v1":
            # upstream offline of the same request
            wav = dict(np.load(root / "out" / "clone_prompt.npz"))["wav"]
        cos = cosine(result.audio.samples, wav) if result.audio.samples.shape == wav.shape else float("nan")
        print(f"{case.name:20s} {len(latents):4d}/{len(ref['patches']):<4d} "
              f"{result.details['attempts'][0]:4d}/{int(ref['runs']):<3d} {diff:12.2e} {figures[1][2]:11.2e} "
              f"{cos:12.8f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
