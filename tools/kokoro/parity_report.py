"""Prints the figures tests/kokoro/test_parity.py bounds: for every parity case, ours against hexgrad's
KModel (PyPI kokoro 0.9.4) on the same random checkpoints, with the AdaIN kernel (the default) and with
upstream's torch passes (``AUDIOCPP_ADAIN_KERNEL=0``, run in a second process): durations equal or not, max
absolute difference, audio cosine.

    python tools/kokoro/parity_report.py [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def ours(work: Path) -> None:
    """One process: our result of every case, saved as npz per case."""
    import warnings

    import torch

    import audiocpp.engine as ac
    from tests.kokoro.cases import CASES

    torch.set_num_threads(1)
    checkpoints = json.loads((work / "checkpoints.json").read_text())
    models = {}
    tag = "kernel" if os.environ.get("AUDIOCPP_ADAIN_KERNEL") != "0" else "passes"
    for case in CASES:
        if case.checkpoint not in models:
            models[case.checkpoint] = ac.load(checkpoints[case.checkpoint])
        session = models[case.checkpoint].session("tts", mode="streaming" if case.streaming else "offline")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = session.run(ac.TaskRequest(text=case.request_text, seed=case.seed, options={
                "phonemes": True, "voice": case.voice, "speed": case.speed,
                "kokoro.source_noise": case.noise}))
        np.savez(work / f"{tag}-{case.name}.npz", audio=result.audio.samples,
                 pred_dur=np.array(json.dumps(result.details["pred_dur"])))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path)
    parser.add_argument("--ours", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.ours is not None:
        ours(args.ours)
        return 0
    from tests.kokoro.cases import CASES
    from tools.kokoro.checkpoint import write_checkpoint

    work = args.work or Path(tempfile.mkdtemp(prefix="kokoro-parity-"))
    work.mkdir(parents=True, exist_ok=True)
    checkpoints = {"tiny": write_checkpoint(work / "tiny", "tiny", seed=1234),
                   "tiny_plain": write_checkpoint(work / "tiny_plain", "tiny", seed=99, instance_affine=False,
                                                  prefix=""),
                   "real": write_checkpoint(work / "real", "real", seed=5)}
    (work / "checkpoints.json").write_text(json.dumps({k: str(v) for k, v in checkpoints.items()}))
    spec = {"checkpoints": {k: str(v) for k, v in checkpoints.items()},
            "cases": [c.upstream() for c in CASES], "threads": 1}
    (work / "cases.json").write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    python = REPO / ".ref-envs" / "kokoro" / "bin" / "python"
    subprocess.run([str(python), str(REPO / "tools" / "kokoro" / "reference.py"), str(work / "cases.json"),
                    str(work / "ref")], check=True, capture_output=True)
    for switch in ("1", "0"):
        env = {**os.environ, "AUDIOCPP_ADAIN_KERNEL": switch}
        subprocess.run([sys.executable, __file__, "--ours", str(work)], check=True, env=env)
    head = "durations  max|diff|  cosine"
    print(f"{'case':22s} {'kernel: ' + head:40s} torch passes: {head}")
    for case in CASES:
        ref = np.load(work / "ref" / f"{case.name}.npz")
        expected = np.concatenate([ref[f"audio_{i}"] for i in range(len(case.chunks))])
        durations = [ref[f"pred_dur_{i}"].tolist() for i in range(len(case.chunks))]
        cells = []
        for tag in ("kernel", "passes"):
            got = np.load(work / f"{tag}-{case.name}.npz")
            audio, same = got["audio"], json.loads(str(got["pred_dur"])) == durations
            if audio.shape != expected.shape:
                cells.append(f"{'equal' if same else 'DIFFER':9s} length differs")
                continue
            cos = float(audio @ expected / (np.linalg.norm(audio) * np.linalg.norm(expected) + 1e-30))
            cells.append(f"{'equal' if same else 'DIFFER':9s} {float(np.abs(audio - expected).max()):9.2e}  "
                         f"{cos:.9f}")
        print(f"{case.name:22s} {cells[0]:40s} {cells[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
