"""Run hexgrad's ``KModel`` (PyPI kokoro 0.9.4) on a checkpoint and dump what the parity tests compare.

Runs inside ``.ref-envs/kokoro`` (tools/reference_envs/kokoro.sh), never in the project venv:

    .ref-envs/kokoro/bin/python tools/kokoro/reference.py CASES.json OUT_DIR

``CASES.json``: ``{"checkpoints": {name: dir}, "cases": [{"name", "checkpoint", "voice", ...}]}``. A case
gives either ``phonemes`` (``KModel.forward(phonemes, pack[len(phonemes) - 1], speed)``, the style row
``KPipeline.infer`` picks) or ``ids`` (``forward_with_tokens([[0, *ids, 0]], pack[len(ids) - 1], speed)``),
with ``speed``, ``seed`` (``torch.manual_seed`` before the call: the source's draws) or ``"noise": false``
(``torch.rand`` / ``torch.randn_like`` return zeros: the deterministic source of kokoro-onnx's export),
and ``chunks`` (a list of phoneme strings run one after another under one seed, as ``KPipeline`` runs a
long text). For every checkpoint the script first checks that each tensor of the ``.pth`` reached the
model bit-exactly (``KModel`` falls back to ``strict=False``, which would hide a missing tensor). Each
case writes ``OUT_DIR/<name>.npz`` (``audio``, ``pred_dur``, per chunk); stdout's last line is a JSON
summary.
"""

from __future__ import annotations

import contextlib
import json
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

warnings.filterwarnings("ignore")


def _load(ckpt: Path):
    from kokoro import KModel

    config = json.loads((ckpt / "config.json").read_text(encoding="utf-8"))
    pth = next(p for p in sorted(ckpt.glob("*.pth")))
    model = KModel(repo_id="hexgrad/Kokoro-82M", config=config, model=str(pth)).eval()
    saved = torch.load(pth, map_location="cpu", weights_only=True)
    checked = 0
    for top, sub in saved.items():
        state = getattr(model, top).state_dict()
        for key, value in sub.items():
            name = key[len("module."):] if key.startswith("module.") else key
            if name not in state:
                raise SystemExit(f"round trip: {top}.{name} of the file is not a tensor of KModel")
            if not torch.equal(state[name], value):
                raise SystemExit(f"round trip: {top}.{name} differs after loading")
            checked += 1
    return model, checked


@contextlib.contextmanager
def _no_noise():
    rand, randn_like = torch.rand, torch.randn_like
    torch.rand = lambda *a, **k: torch.zeros(*a, **{x: y for x, y in k.items() if x != "generator"})
    torch.randn_like = lambda t, **k: torch.zeros_like(t)
    try:
        yield
    finally:
        torch.rand, torch.randn_like = rand, randn_like


def run_case(model, ckpt: Path, case: dict, out: Path) -> dict:
    pack = torch.load(ckpt / "voices" / f"{case['voice']}.pt", weights_only=True)
    speed = float(case.get("speed", 1.0))
    noise = case.get("noise", True)
    if noise:
        torch.manual_seed(int(case.get("seed", 0)))
    arrays: dict[str, np.ndarray] = {}
    chunks = case.get("chunks") or [case.get("phonemes")]
    with (contextlib.nullcontext() if noise else _no_noise()):
        for i, ps in enumerate(chunks):
            if ps is None:
                ids = [int(x) for x in case["ids"]]
                ref_s = pack[len(ids) - 1]
                audio, pred_dur = model.forward_with_tokens(torch.LongTensor([[0, *ids, 0]]), ref_s, speed)
                audio = audio.squeeze()
            else:
                output = model(ps, pack[len(ps) - 1], speed, return_output=True)
                audio, pred_dur = output.audio, output.pred_dur
            arrays[f"audio_{i}"] = audio.float().numpy()
            arrays[f"pred_dur_{i}"] = pred_dur.numpy().astype(np.int64)
    np.savez(out / f"{case['name']}.npz", **arrays)
    return {"name": case["name"], "chunks": len(chunks),
            "samples": [int(arrays[f"audio_{i}"].shape[0]) for i in range(len(chunks))]}


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    out = Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(int(spec.get("threads", 1)))
    models, summary = {}, {"checked": {}, "cases": []}
    for name, ckpt in spec["checkpoints"].items():
        models[name], summary["checked"][name] = _load(Path(ckpt))
    for case in spec["cases"]:
        ckpt = Path(spec["checkpoints"][case["checkpoint"]])
        summary["cases"].append(run_case(models[case["checkpoint"]], ckpt, case, out))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
