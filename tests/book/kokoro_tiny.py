"""A tiny random Kokoro checkpoint in hexgrad's layout, quick enough for the book and batch tests.

``tools/kokoro/checkpoint.py``'s "tiny" model keeps a wide vocoder (``upsample_initial_channel`` 512 at
a 12-sample frame) whose words last a few milliseconds and whose chunks take about a second each on
one thread; this one has the real model's frame (upsampling 10 x 6, hop 5: 300 samples a duration
frame, so a word lasts 50-200 ms as in speech) with a 64-channel vocoder, and takes about 0.1 s a
chunk. Everything else is the tool's: its tiny config and vocabulary, its random tensors (named and
scaled as upstream's, the duration head set to about 3 frames a token), its voices af_test and jf_test.
"""

from __future__ import annotations

import json
from pathlib import Path

VOICES = ("af_test", "jf_test")


def write_kokoro(out: Path, seed: int = 7) -> Path:
    import torch

    from audiocpp.families.kokoro.config import KokoroConfig
    from audiocpp.families.kokoro.model import KModel
    from tools.kokoro import checkpoint as tool

    out.mkdir(parents=True, exist_ok=True)
    config = tool.config_for("tiny")
    config["istftnet"].update(
        upsample_rates=[10, 6],
        upsample_kernel_sizes=[20, 12],
        gen_istft_hop_size=5,
        gen_istft_n_fft=20,
        upsample_initial_channel=64,
    )
    cfg = KokoroConfig.from_dict(config)
    with torch.device("meta"):
        model = KModel(cfg)
    state = tool.random_state(model, torch.Generator().manual_seed(seed), instance_affine=True)
    torch.save(
        {top: {f"module.{k}": v.contiguous() for k, v in sub.items()} for top, sub in state.items()},
        out / "kokoro-v1_0.pth",
    )
    (out / "config.json").write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
    (out / "voices").mkdir(exist_ok=True)
    for i, name in enumerate(VOICES):
        pack = 0.3 * torch.randn(
            (510, 1, 2 * cfg.style_dim), generator=torch.Generator().manual_seed(seed + i)
        )
        torch.save(pack, out / "voices" / f"{name}.pt")
    return out
