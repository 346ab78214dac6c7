"""Kokoro checkpoints with random weights, in hexgrad's layout (``hexgrad/Kokoro-82M``).

``write_checkpoint(out_dir, size)`` writes ``config.json``, ``kokoro-v1_0.pth`` (a dict of the five
sub-state-dicts ``bert``, ``bert_encoder``, ``predictor``, ``text_encoder``, ``decoder``, each key
prefixed ``module.`` as in the released file unless ``prefix=""``; weight-normed convolutions as
``weight_g`` / ``weight_v`` pairs, ALBERT's unused pooler included) and ``voices/<name>.pt`` packs
(float32 ``[510, 1, 256]``: one style row per phoneme count). Names and shapes come from the family's
modules built on the meta device; upstream's ``KModel`` loads the result strictly in the parity
reference, which proves the layout.

Values come from a seeded generator, scaled like PyTorch's default initialisation; constants upstream
starts from (norm weights, Snake alphas, weight-norm gains) are perturbed so that a mistake shows. The
duration head's bias is lowered so that a token lasts a few frames (random weights would give half of
``max_dur``), and the generator's last conv is damped (its output is exponentiated).

    python tools/kokoro/checkpoint.py OUT_DIR [--size tiny|real] [--no-instance-affine] [--no-prefix]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

#: The v1.0 phoneme vocabulary's symbols (ids from 1 in this order are the tests' own vocab: the real
#: ids come with the real files).
SYMBOLS = (";:,.!?—…\"()“” ̃ʣʥʦʨᵝꭧAIOQSTWYᵊabcdefhijklmnopqrstuvwxyzɑɐɒæβɔɕçɖðʤəɚɛɜɟɡɥɨɪʝɯɰŋɳɲɴøɸθœɹɾɻʁɽʂʃʈʧ"
           "ʊʋʌɣɤχʎʒʔˈˌːʰʲ↓→↗↘ᵻ")

TINY: dict[str, Any] = {
    "istftnet": {
        "upsample_kernel_sizes": [5, 4], "upsample_rates": [3, 2], "gen_istft_hop_size": 2,
        "gen_istft_n_fft": 8, "resblock_dilation_sizes": [[1, 3, 5], [1, 2, 3]],
        "resblock_kernel_sizes": [3, 5], "upsample_initial_channel": 512,
    },
    "dim_in": 64, "dropout": 0.2, "hidden_dim": 512, "max_conv_dim": 512, "max_dur": 8, "multispeaker": True,
    "n_layer": 2, "n_mels": 80, "n_token": 178, "style_dim": 128, "text_encoder_kernel_size": 5,
    "plbert": {"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 96,
               "max_position_embeddings": 96, "num_hidden_layers": 3, "dropout": 0.1},
}
SUB_MODELS = ("bert", "bert_encoder", "predictor", "text_encoder", "decoder")
VOICES = ("af_test", "jf_test")


def config_for(size: str) -> dict[str, Any]:
    from audiocpp.families.kokoro.config import V1_0

    base = {"tiny": TINY, "real": V1_0}[size]
    vocab = {s: i + 1 for i, s in enumerate(dict.fromkeys(SYMBOLS))}
    return {**json.loads(json.dumps(base)), "vocab": vocab}


def weight_normed(model: torch.nn.Module) -> set[str]:
    """The module names whose ``weight`` upstream wraps in ``weight_norm``."""
    from audiocpp.families.kokoro.model.istftnet import AdainResBlk1d, AdaINResBlock1, Decoder, Generator
    from audiocpp.families.kokoro.model.prosody import TextEncoder

    names: set[str] = set()
    for name, module in model.named_modules():
        prefix = f"{name}." if name else ""
        if isinstance(module, AdaINResBlock1):
            names |= {f"{prefix}convs{j}.{i}" for j in (1, 2) for i in range(len(module.convs1))}
        elif isinstance(module, AdainResBlk1d):
            names |= {f"{prefix}conv1", f"{prefix}conv2"}
            if module.learned_sc:
                names.add(f"{prefix}conv1x1")
            if module.upsample_type != "none":
                names.add(f"{prefix}pool")
        elif isinstance(module, Generator):
            names |= {f"{prefix}ups.{i}" for i in range(len(module.ups))} | {f"{prefix}conv_post"}
        elif isinstance(module, Decoder):
            names |= {f"{prefix}F0_conv", f"{prefix}N_conv", f"{prefix}asr_res.0"}
        elif isinstance(module, TextEncoder):
            names |= {f"{prefix}cnn.{i}.0" for i in range(len(module.cnn))}
    return names


def _value(name: str, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    leaf = name.rsplit(".", 1)[-1]
    randn = torch.randn(shape, generator=gen)
    if leaf == "gamma" or name.endswith(("LayerNorm.weight", "norm.weight")):
        return 1.0 + 0.1 * randn
    if leaf.startswith("alpha"):
        return 0.6 + 0.8 * torch.rand(shape, generator=gen)
    if "embeddings" in name or name.endswith("embedding.weight"):
        return randn
    if leaf in ("bias", "beta") or leaf.startswith("bias_"):
        return 0.05 * randn
    if leaf.startswith("weight_hh") or leaf.startswith("weight_ih"):
        bound = 1.0 / math.sqrt(shape[0] // 4)
        return (torch.rand(shape, generator=gen) * 2 - 1) * bound
    fan_in = shape[1] * math.prod(shape[2:]) if len(shape) >= 2 else shape[0]
    bound = 1.0 / math.sqrt(max(fan_in, 1))
    return (torch.rand(shape, generator=gen) * 2 - 1) * bound


def random_state(model: torch.nn.Module, gen: torch.Generator, *, instance_affine: bool) -> dict[str, Any]:
    """Upstream-named tensors per sub-model (without the ``module.`` prefix)."""
    normed = weight_normed(model)
    state: dict[str, dict[str, torch.Tensor]] = {k: {} for k in SUB_MODELS}
    for name, t in model.state_dict(keep_vars=True).items():
        if not t.is_floating_point():
            continue
        top, _, rest = name.partition(".")
        stem, _, leaf = name.rpartition(".")
        if not instance_affine and ".norm." in f".{rest}" and stem.endswith(".norm"):
            continue  # InstanceNorm1d(affine=True) parameters the training checkpoint lacks
        value = _value(name, tuple(t.shape), gen)
        if name == "predictor.duration_proj.linear_layer.bias":  # about 3 frames a token
            value = value + math.log(3.0 / (model.cfg.max_dur - 3.0))
        if name == "predictor.duration_proj.linear_layer.weight":  # durations that differ by token:
            value = value + 30.0 * value[:1]  # every output shares a direction
        if stem.endswith("generator.conv_post"):
            value = value * 0.1
        if stem in normed and leaf == "weight":
            norm = value.flatten(1).norm(dim=1).reshape(-1, *([1] * (value.dim() - 1)))
            state[top][f"{rest[: -len('.weight')]}.weight_g"] = norm * (
                1.0 + 0.1 * torch.randn(norm.shape, generator=gen))
            state[top][f"{rest[: -len('.weight')]}.weight_v"] = value
        else:
            state[top][rest] = value
    hidden = model.cfg.plbert.hidden_size
    state["bert"]["pooler.weight"] = _value("bert.pooler.weight", (hidden, hidden), gen)
    state["bert"]["pooler.bias"] = _value("bert.pooler.bias", (hidden,), gen)
    return state


def write_checkpoint(out_dir: str | Path, size: str = "tiny", *, seed: int = 1234,
                     instance_affine: bool = True,
                     prefix: str = "module.", voices: tuple[str, ...] = VOICES,
                     filename: str = "kokoro-v1_0.pth") -> Path:
    from audiocpp.families.kokoro.config import KokoroConfig
    from audiocpp.families.kokoro.model import KModel

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = config_for(size)
    cfg = KokoroConfig.from_dict(config)
    gen = torch.Generator().manual_seed(seed)
    with torch.device("meta"):
        model = KModel(cfg)
    state = random_state(model, gen, instance_affine=instance_affine)
    torch.save({top: {f"{prefix}{k}": v.contiguous() for k, v in sub.items()} for top, sub in state.items()},
               out / filename)
    (out / "config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False), encoding="utf-8")
    (out / "voices").mkdir(exist_ok=True)
    for i, name in enumerate(voices):
        gen_voice = torch.Generator().manual_seed(seed + i)
        pack = 0.3 * torch.randn((510, 1, 2 * cfg.style_dim), generator=gen_voice)
        torch.save(pack, out / "voices" / f"{name}.pt")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--size", choices=["tiny", "real"], default="tiny")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--no-instance-affine", action="store_true")
    parser.add_argument("--no-prefix", action="store_true")
    args = parser.parse_args(argv)
    write_checkpoint(args.out, args.size, seed=args.seed, instance_affine=not args.no_instance_affine,
                     prefix="" if args.no_prefix else "module.")
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
