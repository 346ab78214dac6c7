"""VoxCPM1 / 1.5 checkpoints with random weights, in the two upstream HF layouts.

- 0.5B style (``openbmb/VoxCPM-0.5B``): ``pytorch_model.bin`` (``{"state_dict": ...}``) and
  ``audiovae.pth``; patch 2, AudioVAE 16 kHz in and out, rates [2,5,8,8] / [8,8,5,2].
- 1.5 style (``openbmb/VoxCPM1.5``): ``model.safetensors`` and ``audiovae.pth``; patch 4,
  AudioVAE 44.1 kHz, odd strides [2,3,6,7,7] / [7,7,6,3,2], depthwise.

Both carry ``config.json`` (architecture ``voxcpm``) and the tiny tokenizer files. Tensor names,
shapes and values come from tools/voxcpm2/checkpoint.py (our modules on the meta device, values
scaled like PyTorch's initialisation, constants perturbed, weight-norm pairs for the VAE).

    python tools/voxcpm1/checkpoint.py OUT_DIR [--size tiny_05b|tiny_15|real_05b] [--dtype float32|bfloat16]
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: tools/ is a package of the repository root
    sys.path.insert(0, str(REPO))

from tools.voxcpm2.checkpoint import TINY_V1, write_checkpoint  # noqa: E402

# 0.5B style: the tiny v1 network of the VoxCPM2 tests (muP, patch 2, residual LM with rope,
# AudioVAE v1 with the odd stride 5 that separates v1 from v2 causal padding), 16 kHz.
TINY_05B: dict[str, Any] = copy.deepcopy(TINY_V1)

# 1.5 style: patch 4, deeper local modules and residual LM than the base LM, FSQ 32, and the
# AudioVAE of VoxCPM1.5 scaled down in width only (rates [2,3,6,7,7] / [7,7,6,3,2], hop 1764,
# 44.1 kHz, depthwise).
TINY_15: dict[str, Any] = copy.deepcopy(TINY_V1)
TINY_15.update(patch_size=4, residual_lm_num_layers=3, scalar_quantization_latent_dim=32, max_length=512)
TINY_15["encoder_config"].update(num_layers=3)
TINY_15["dit_config"].update(num_layers=3)
TINY_15["audio_vae_config"] = {
    "encoder_dim": 4, "encoder_rates": [2, 3, 6, 7, 7], "latent_dim": 16, "decoder_dim": 64,
    "decoder_rates": [7, 7, 6, 3, 2], "depthwise": True, "sample_rate": 44100,
}

# VoxCPM-0.5B dimensions (upstream's config.json): 24+6 LM layers of 1024 (16 heads,
# 2 KV heads, head 64), local encoder / DiT 4 layers of 1024, patch 2, latent 64, FSQ 256,
# AudioVAE 16 kHz (128, [2,5,8,8]; 1536, [8,8,5,2]). LongRoPE factors are 1.0 (random weights).
REAL_05B: dict[str, Any] = {
    "architecture": "voxcpm",
    "lm_config": {
        "bos_token_id": 1, "eos_token_id": 2, "hidden_size": 1024, "intermediate_size": 4096,
        "max_position_embeddings": 32768, "num_attention_heads": 16, "num_hidden_layers": 24,
        "num_key_value_heads": 2, "rms_norm_eps": 1e-05, "rope_theta": 10000,
        "rope_scaling": {"type": "longrope", "long_factor": [1.0] * 32, "short_factor": [1.0] * 32,
                         "original_max_position_embeddings": 32768},
        "vocab_size": 73448, "use_mup": True, "scale_emb": 12, "dim_model_base": 256, "scale_depth": 1.4,
    },
    "patch_size": 2, "feat_dim": 64, "residual_lm_num_layers": 6, "scalar_quantization_latent_dim": 256,
    "scalar_quantization_scale": 9,
    "encoder_config": {"hidden_dim": 1024, "ffn_dim": 4096, "num_heads": 16, "num_layers": 4},
    "dit_config": {
        "hidden_dim": 1024, "ffn_dim": 4096, "num_heads": 16, "num_layers": 4,
        "cfm_config": {"sigma_min": 1e-06, "solver": "euler", "t_scheduler": "log-norm",
                       "inference_cfg_rate": 2.0},
    },
    "audio_vae_config": {
        "encoder_dim": 128, "encoder_rates": [2, 5, 8, 8], "latent_dim": 64, "decoder_dim": 1536,
        "decoder_rates": [8, 8, 5, 2], "depthwise": True, "sample_rate": 16000,
    },
    "max_length": 4096, "device": "cpu", "dtype": "float32",
}

# name -> (config, weights file)
CONFIGS: dict[str, tuple[dict[str, Any], str]] = {
    "tiny_05b": (TINY_05B, "bin"), "tiny_15": (TINY_15, "safetensors"), "real_05b": (REAL_05B, "bin"),
}


def write_v1_checkpoint(out_dir: str | Path, config: dict[str, Any], *, seed: int = 1234,
                        weights: str = "safetensors", dtype: torch.dtype = torch.float32,
                        stop_tie: float = 0.0) -> Path:
    """Write a VoxCPM1 checkpoint; ``weights`` is ``safetensors`` (model.safetensors) or ``bin``
    (pytorch_model.bin holding ``{"state_dict": ...}``, as VoxCPM-0.5B).

    ``stop_tie > 0`` sets the stop head's "stop" row to its "continue" row plus ``stop_tie`` times
    Gaussian noise: the two logits nearly tie, so the stop head fires after a few patches instead
    of never (random weights rarely stop), which exercises the stop step."""
    if weights not in ("safetensors", "bin"):
        raise ValueError(f"weights must be 'safetensors' or 'bin', not {weights!r}")
    out = write_checkpoint(out_dir, config, seed=seed, dtype=dtype)
    st = out / "model.safetensors"
    if weights == "safetensors" and not stop_tie:
        return out
    from safetensors.torch import load_file, save_file

    state = dict(load_file(str(st)))
    if stop_tie:
        head = state["stop_head.weight"].to(torch.float32)
        noise = torch.randn(head.shape[1], generator=torch.Generator().manual_seed(seed + 1))
        head[1] = head[0] + stop_tie * noise
        state["stop_head.weight"] = head.to(dtype)
    if weights == "bin":
        torch.save({"state_dict": state}, out / "pytorch_model.bin")
        st.unlink()
    else:
        save_file(state, str(st))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--size", choices=sorted(CONFIGS), default="tiny_05b")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--stop-tie", type=float, default=0.0,
                        help="near-tie stop head (see write_v1_checkpoint)")
    args = parser.parse_args(argv)
    config, weights = CONFIGS[args.size]
    write_v1_checkpoint(args.out, config, seed=args.seed, weights=weights, dtype=getattr(torch, args.dtype),
                        stop_tie=args.stop_tie)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
