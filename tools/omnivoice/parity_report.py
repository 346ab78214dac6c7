"""Print the OmniVoice parity figures: per case of tests/omnivoice/cases.py, the chunks, the
tokens equal to upstream's, the step-0 logits max difference, the audio max difference and
cosine. The tests (tests/omnivoice/test_parity.py) assert the bounds, this prints the numbers.

    .venv/bin/python tools/omnivoice/parity_report.py [WORKDIR]

Needs the reference env (``bash tools/reference_envs/omnivoice.sh``): upstream builds the tiny
checkpoint with its own classes (tools/omnivoice/checkpoint.py) and runs every case
(tools/omnivoice/reference.py).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.omnivoice.cases import cases, our_options, write_cases, write_references  # noqa: E402
from tests.support import run_reference  # noqa: E402

HERE = Path(__file__).resolve().parent


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-300))


def task_of(case: dict) -> str:
    if case.get("ref_audio") or case.get("voice_prompt_in"):
        return "clone"
    return "design" if case.get("instruct") else "tts"


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path(tempfile.mkdtemp(prefix="omnivoice-parity-"))
    root.mkdir(parents=True, exist_ok=True)
    snapshot = root / "OmniVoice"
    if not (snapshot / "config.json").is_file():
        run_reference("omnivoice", HERE / "checkpoint.py", snapshot, timeout=600)
    refs = write_references(root / "refs")
    items = cases(refs, root / "upstream_prompt.pt")
    write_cases(root / "cases.json", items)
    run_reference("omnivoice", HERE / "reference.py", snapshot, root / "cases.json", root / "out",
                  timeout=1200)

    torch.set_num_threads(1)
    from audiocpp.engine.records import TaskRequest, VoiceReference
    from audiocpp.engine.registry import get_family
    from audiocpp.families.omnivoice.generate import build_batch

    model = get_family("omnivoice").load(snapshot)
    print(f"{'case':15s} {'chunks':>6s} {'tokens equal':>14s} {'step-0 logits':>13s} {'audio diff':>11s} "
          f"{'audio cos':>12s}")
    for case in items:  # in order: clone_prompt reads the prompt upstream writes in 'clone'
        ref = np.load(root / "out" / f"{case['name']}.npz")
        request = TaskRequest(text=case["text"], options=our_options(case),
                              voice=VoiceReference(path=case["ref_audio"]) if case.get("ref_audio") else None,
                              voice_prompt=case.get("voice_prompt_in"))
        result = model.session(task_of(case)).run(request)
        batch = build_batch(result.details["prompts"][0], model.cfg.audio_mask_id)
        with torch.inference_mode():
            logits = model.lm(batch.input_ids, batch.audio_mask, batch.attention_mask).numpy()
        logit_diff = float(np.abs(logits - ref["step0_logits"]).max())
        keys = sorted((k for k in ref.files if k.startswith("tokens_")), key=lambda k: int(k.split("_")[1]))
        ours = result.details["tokens"]
        equal = sum(int((o == ref[k]).sum()) for o, k in zip(ours, keys)) if len(ours) == len(keys) else 0
        total = sum(ref[k].size for k in keys)
        audio, expected = result.audio.samples, ref["audio"]
        same = audio.shape == expected.shape
        diff = float(np.abs(audio - expected).max()) if same else float("nan")
        cos = cosine(audio, expected) if same else float("nan")
        print(f"{case['name']:15s} {len(ours):6d} {equal:6d}/{total:<7d} {logit_diff:13.2e} {diff:11.2e} "
              f"{cos:12.9f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
