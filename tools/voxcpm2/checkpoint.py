"""VoxCPM2 checkpoints with random weights, in the upstream HF layout (reference section 3).

``write_checkpoint(out_dir, config)`` writes ``config.json``, ``model.safetensors`` (every
generator tensor), ``audiovae.pth`` (``{"state_dict": ...}``, weight-norm pairs
``weight_g`` / ``weight_v`` as ``torch.nn.utils.weight_norm`` stores them, plus the
``decoder.sr_bin_boundaries`` buffer) and the tiny tokenizer files. Tensor names and shapes come
from our modules built on the meta device, so nothing of model size is allocated twice; the
upstream reference loads the result and the parity tests assert every tensor round-trips.

Values are drawn from a seeded generator, scaled like PyTorch's default initialisation
(uniform in +-1/sqrt(fan_in)); parameters that start as constants upstream (norm weights,
Snake alpha, weight-norm gains, sample-rate embeddings) are perturbed around them so that a
mistake in their use shows up.

    python tools/voxcpm2/checkpoint.py OUT_DIR [--size tiny|tiny_mup|real] [--dtype float32|bfloat16]
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: tools/ is a package of the repository root
    sys.path.insert(0, str(REPO))

from tools.voxcpm2.tokenizer import write_tokenizer  # noqa: E402

TINY_FACTORS_SHORT = [1.0, 1.1, 1.3, 1.6, 2.0, 2.5, 3.1, 3.8]
TINY_FACTORS_LONG = [1.0, 1.4, 2.0, 2.9, 4.1, 5.8, 8.2, 11.6]

TINY_V2: dict[str, Any] = {
    "architecture": "voxcpm2",
    "lm_config": {
        "bos_token_id": 1, "eos_token_id": 2, "hidden_size": 64, "intermediate_size": 128,
        "max_position_embeddings": 512, "num_attention_heads": 4, "num_hidden_layers": 2,
        "num_key_value_heads": 2, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
        "rope_scaling": {"type": "longrope", "long_factor": TINY_FACTORS_LONG,
                         "short_factor": TINY_FACTORS_SHORT, "original_max_position_embeddings": 256},
        "vocab_size": 550, "use_mup": False, "scale_emb": 12, "dim_model_base": 256, "scale_depth": 1.4,
    },
    "patch_size": 4, "feat_dim": 16, "residual_lm_num_layers": 2, "residual_lm_no_rope": True,
    "scalar_quantization_latent_dim": 32, "scalar_quantization_scale": 9,
    "encoder_config": {"hidden_dim": 32, "ffn_dim": 64, "num_heads": 4, "num_layers": 2, "kv_channels": 16},
    "dit_config": {
        "hidden_dim": 32, "ffn_dim": 64, "num_heads": 4, "num_layers": 2, "kv_channels": 16,
        "cfm_config": {"sigma_min": 1e-06, "solver": "euler", "t_scheduler": "log-norm",
                       "training_cfg_rate": 0.1, "inference_cfg_rate": 1.0},
    },
    "audio_vae_config": {
        "encoder_dim": 8, "encoder_rates": [2, 5], "latent_dim": 16, "decoder_dim": 32,
        "decoder_rates": [5, 3, 2], "depthwise": True, "sample_rate": 16000, "out_sample_rate": 48000,
        "sr_bin_boundaries": [20000, 30000, 40000], "cond_type": "scale_bias",
    },
    "max_length": 512, "device": "cpu", "dtype": "float32",
}

# The same network with muP on (residual scaling, embedding scale) and rope on the residual LM.
TINY_V2_MUP: dict[str, Any] = copy.deepcopy(TINY_V2)
TINY_V2_MUP["lm_config"]["use_mup"] = True
TINY_V2_MUP["residual_lm_no_rope"] = False

# A tiny VoxCPM1 (architecture "voxcpm", model/voxcpm.py): muP on, patch 2, residual LM with rope,
# addition fusion, summed DiT conditioning, AudioVAE v1 (16 kHz in and out, no sample-rate
# conditioning, v1 causal padding; the odd encoder stride 5 tells v1 and v2 padding apart).
TINY_V1: dict[str, Any] = copy.deepcopy(TINY_V2)
TINY_V1["architecture"] = "voxcpm"
TINY_V1["lm_config"]["use_mup"] = True
TINY_V1["patch_size"] = 2
del TINY_V1["residual_lm_no_rope"]
for _key in ("encoder_config", "dit_config"):
    del TINY_V1[_key]["kv_channels"]
    TINY_V1[_key].update(hidden_dim=64, num_heads=4)
TINY_V1["audio_vae_config"] = {"encoder_dim": 8, "encoder_rates": [2, 5], "latent_dim": 16, "decoder_dim": 32,
                               "decoder_rates": [5, 2], "depthwise": True, "sample_rate": 16000}

# VoxCPM2 dimensions (upstream's config.json): 28+8 LM layers of 2048, 12+12 local
# layers of 1024 (16 heads x 128), patch 4, latent 64, 16 kHz in, 48 kHz out.
REAL_V2: dict[str, Any] = {
    "architecture": "voxcpm2",
    "lm_config": {
        "bos_token_id": 1, "eos_token_id": 2, "hidden_size": 2048, "intermediate_size": 6144,
        "max_position_embeddings": 32768, "num_attention_heads": 16, "num_hidden_layers": 28,
        "num_key_value_heads": 2, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "kv_channels": 128,
        "rope_scaling": {"type": "longrope", "long_factor": [1.0] * 64, "short_factor": [1.0] * 64,
                         "original_max_position_embeddings": 32768},
        "vocab_size": 73448, "use_mup": False, "scale_emb": 12, "dim_model_base": 256, "scale_depth": 1.4,
    },
    "patch_size": 4, "feat_dim": 64, "residual_lm_num_layers": 8, "residual_lm_no_rope": True,
    "scalar_quantization_latent_dim": 512, "scalar_quantization_scale": 9,
    "encoder_config": {"hidden_dim": 1024, "ffn_dim": 4096, "num_heads": 16, "num_layers": 12,
                       "kv_channels": 128},
    "dit_config": {
        "hidden_dim": 1024, "ffn_dim": 4096, "num_heads": 16, "num_layers": 12, "kv_channels": 128,
        "cfm_config": {"sigma_min": 1e-06, "solver": "euler", "t_scheduler": "log-norm",
                       "inference_cfg_rate": 2.0},
    },
    "audio_vae_config": {
        "encoder_dim": 128, "encoder_rates": [2, 5, 8, 8], "latent_dim": 64, "decoder_dim": 2048,
        "decoder_rates": [8, 6, 5, 2, 2, 2], "depthwise": True, "sample_rate": 16000,
        "out_sample_rate": 48000, "sr_bin_boundaries": [20000, 30000, 40000],
    },
    "max_length": 8192, "device": "cpu", "dtype": "float32",
}

CONFIGS = {"tiny": TINY_V2, "tiny_mup": TINY_V2_MUP, "tiny_v1": TINY_V1, "real": REAL_V2}


def _value(name: str, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    def randn() -> torch.Tensor:
        return torch.randn(shape, generator=gen)

    leaf = name.rsplit(".", 1)[-1]
    if name.endswith("layernorm.weight") or name.endswith("norm.weight"):
        return 1.0 + 0.1 * randn()
    if leaf == "alpha":
        return 0.5 + torch.rand(shape, generator=gen)
    if name.endswith("scale_embed.weight"):
        return 1.0 + 0.1 * randn()
    if name.endswith("bias_embed.weight") or name.endswith("cond_embed.weight"):
        return 0.1 * randn()
    if leaf == "special_token" or name.endswith("embed_tokens.weight"):
        return randn()
    if leaf == "bias":
        return 0.05 * randn()
    fan_in = shape[1] * math.prod(shape[2:]) if len(shape) >= 2 else shape[0]
    bound = 1.0 / math.sqrt(max(fan_in, 1))
    return (torch.rand(shape, generator=gen) * 2 - 1) * bound


def random_state(module: torch.nn.Module, gen: torch.Generator,
                 dtype: torch.dtype) -> dict[str, torch.Tensor]:
    out = {}
    for name, t in module.state_dict(keep_vars=True).items():
        if not t.is_floating_point():
            continue
        out[name] = _value(name, tuple(t.shape), gen).to(dtype)
    return out


def write_checkpoint(out_dir: str | Path, config: dict[str, Any], *, seed: int = 1234,
                     dtype: torch.dtype = torch.float32, tokenizer: bool = True) -> Path:
    from safetensors.torch import save_file

    from audiocpp.families.voxcpm2.codec import AudioVAE, CausalConv1d, CausalConvTranspose1d
    from audiocpp.families.voxcpm2.config import VoxCPMConfig
    from audiocpp.families.voxcpm2.model import VoxCPMModel

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = VoxCPMConfig.from_dict(config)
    gen = torch.Generator().manual_seed(seed)
    with torch.device("meta"):
        model = VoxCPMModel(cfg)
        vae = AudioVAE(cfg.audio_vae)
    state = random_state(model, gen, dtype)
    save_file({k: v.contiguous() for k, v in state.items()}, str(out / "model.safetensors"))
    del state

    vae_state = random_state(vae, gen, torch.float32)
    convs = {name for name, m in vae.named_modules() if isinstance(m, (CausalConv1d, CausalConvTranspose1d))}
    upstream: dict[str, torch.Tensor] = {}
    for name, value in vae_state.items():
        stem, _, leaf = name.rpartition(".")
        if stem in convs and leaf == "weight":
            norm = value.flatten(1).norm(dim=1).reshape(-1, *([1] * (value.dim() - 1)))
            upstream[f"{stem}.weight_g"] = norm * (1.0 + 0.1 * torch.randn(norm.shape, generator=gen))
            upstream[f"{stem}.weight_v"] = value
        else:
            upstream[name] = value
    if cfg.audio_vae.sr_bin_boundaries is not None:
        upstream["decoder.sr_bin_boundaries"] = torch.tensor(cfg.audio_vae.sr_bin_boundaries,
                                                             dtype=torch.int32)
    torch.save({"state_dict": upstream}, out / "audiovae.pth")
    (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    if tokenizer:
        write_tokenizer(out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--size", choices=sorted(CONFIGS), default="tiny")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args(argv)
    write_checkpoint(args.out, CONFIGS[args.size], seed=args.seed, dtype=getattr(torch, args.dtype))
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
