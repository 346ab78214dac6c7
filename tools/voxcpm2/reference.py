"""Run upstream VoxCPM2 or VoxCPM1 (PyPI voxcpm 2.0.3) on a checkpoint and dump what the parity tests compare.

Runs inside ``.ref-envs/voxcpm`` (tools/reference_envs/voxcpm.sh), never in the project venv:

    .ref-envs/voxcpm/bin/python tools/voxcpm2/reference.py CASES.json OUT_DIR

``CASES.json``: ``{"checkpoints": {name: dir}, "cases": [{"name", "checkpoint", "kind", ...}]}``.
Kinds: ``generate`` (``VoxCPM.generate`` with the case's arguments, under
``torch.manual_seed(seed)``; streaming with ``"streaming": true``), ``vae`` (encode + decode
of a WAV), ``tokenize`` (the wrapped tokenizer on a list of strings). For every checkpoint the
script first checks that each tensor of ``model.safetensors`` (or ``pytorch_model.bin``) and
``audiovae.pth`` reached the model bit-exactly and that the model has no tensor the files lack
(upstream loads with ``strict=False``, which would hide both). Each case writes
``OUT_DIR/<name>.npz``; the last stdout line is a JSON summary.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

warnings.filterwarnings("ignore")


def _load(ckpt: str):
    from voxcpm import VoxCPM

    tts = VoxCPM.from_pretrained(ckpt, load_denoiser=False, optimize=False, device="cpu")
    return tts


def _check_round_trip(model, ckpt: Path) -> int:
    from safetensors.torch import load_file

    if (ckpt / "model.safetensors").is_file():
        expected = dict(load_file(str(ckpt / "model.safetensors")))
    else:  # VoxCPM-0.5B layout: pytorch_model.bin, which upstream loads when safetensors is absent
        model_bin = torch.load(ckpt / "pytorch_model.bin", map_location="cpu", weights_only=True)
        expected = dict(model_bin.get("state_dict", model_bin))
    vae = torch.load(ckpt / "audiovae.pth", map_location="cpu", weights_only=True)
    for k, v in vae.get("state_dict", vae).items():
        expected[f"audio_vae.{k}"] = v
    state = model.state_dict()
    missing = sorted(set(state) - set(expected))
    unexpected = sorted(set(expected) - set(state))
    if missing or unexpected:
        raise SystemExit(f"round trip: model tensors not in the files {missing[:5]}, "
                         f"file tensors not in the model {unexpected[:5]}")
    for name, value in expected.items():
        got = state[name]
        if got.shape != value.shape or not torch.equal(got.to(value.dtype), value):
            raise SystemExit(f"round trip: tensor {name} differs after loading")
    return len(expected)


def _record_inference(model):
    """Wrap ``model._inference`` to capture generated patches and the context length."""
    log: dict = {"patches": [], "context_len": None, "runs": 0}
    original = model._inference

    def wrapped(*args, **kwargs):
        log["runs"] += 1
        log["patches"] = []
        streaming = kwargs.get("streaming", False)
        for item in original(*args, **kwargs):
            # v2 yields (feat_pred, seq, context_len); v1 (feat_pred, seq).
            seq = item[1]
            if len(item) == 3:
                log["context_len"] = int(item[2])
            if streaming:
                # seq: the list of (1, 1, P, D) patches so far; the newest is last.
                log["patches"].append(seq[-1][0, 0].float().numpy().copy())
            else:
                log["patches"] = [p for p in seq.float().numpy()]
            yield item

    model._inference = wrapped
    return log


def run_generate(tts, case: dict) -> dict:
    model = tts.tts_model
    log = _record_inference(model)
    kwargs = dict(case["args"])
    torch.manual_seed(int(case["seed"]))
    if case.get("streaming"):
        chunks = [np.asarray(c, dtype=np.float32) for c in tts.generate_streaming(**kwargs)]
        wav = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
        lengths = np.array([len(c) for c in chunks], dtype=np.int64)
    else:
        wav = np.asarray(tts.generate(**kwargs), dtype=np.float32)
        lengths = np.array([len(wav)], dtype=np.int64)
    del model._inference
    patches = np.stack(log["patches"]) if log["patches"] else np.zeros((0, model.patch_size, model.feat_dim))
    text = kwargs.get("text", "")
    return {
        "wav": wav,
        "chunk_lengths": lengths,
        "patches": patches.astype(np.float32),
        "context_len": np.array(log["context_len"] if log["context_len"] is not None else -1),
        "runs": np.array(log["runs"]),
        "target_tokens": np.array(model.text_tokenizer(text), dtype=np.int64),
    }


def run_vae(tts, case: dict) -> dict:
    import soundfile as sf

    vae = tts.tts_model.audio_vae
    audio, rate = sf.read(case["wav"], dtype="float32")
    x = torch.from_numpy(audio).reshape(1, 1, -1)
    with torch.inference_mode():
        z = vae.encode(x, rate)
        y = vae.decode(z)
    return {"latents": z[0].numpy(), "audio": y[0, 0].numpy()}


def run_tokenize(tts, case: dict) -> dict:
    tok = tts.tts_model.text_tokenizer
    out = {}
    for i, text in enumerate(case["texts"]):
        out[f"ids_{i}"] = np.array(tok(text), dtype=np.int64)
    return out


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    out_dir = Path(argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(int(spec.get("threads", 1)))
    models = {}
    summary: dict = {"round_trip": {}, "cases": {}, "torch": torch.__version__}
    for name, ckpt in spec["checkpoints"].items():
        tts = _load(ckpt)
        summary["round_trip"][name] = _check_round_trip(tts.tts_model, Path(ckpt))
        models[name] = tts
    for case in spec["cases"]:
        tts = models[case["checkpoint"]]
        kind = case["kind"]
        if kind == "generate":
            result = run_generate(tts, case)
        elif kind == "vae":
            result = run_vae(tts, case)
        elif kind == "tokenize":
            result = run_tokenize(tts, case)
        else:
            raise SystemExit(f"unknown case kind {kind!r}")
        np.savez(out_dir / f"{case['name']}.npz", **result)
        summary["cases"][case["name"]] = {k: list(np.shape(v)) for k, v in result.items()}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
