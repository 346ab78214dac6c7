#!/usr/bin/env python3
"""Write a VoxCPM1 / 1.5 snapshot folder as a VoxCPM.cpp GGUF (our own writer of that layout,
for tests; docs/families/voxcpm1.md, "The VoxCPM.cpp GGUF layout", describes it).

The layout, as VoxCPM.cpp's ``scripts/convert_voxcpm_to_gguf.py`` and its quantizer write it:

- ``GGUFWriter(arch="llama")``: ``general.architecture`` "llama", ``llama.*`` LM hyper-parameters;
  the whole ``config.json`` flattened into ``voxcpm_<path>`` keys joined by ``_`` (u32 integers,
  booleans as u32 0/1, f32 floats, arrays, strings; ``null`` left out); ``audio_vae_config``
  filled from upstream's defaults when the config has none.
- the tokenizer as ``tokenizer.ggml.*`` (``engine.tokenizer.gguf_tokenizer_metadata``, style
  ``llama_bpe``: tokens padded to the LM vocab with ``[PAD<i>]``, added tokens CONTROL).
- tensors renamed llama.cpp-style (:func:`cpp_name`); the AudioVAE under ``audio_vae.`` with its
  weight norm folded (``--fold torch``: ``torch._weight_norm``, what upstream's hook computes;
  ``--fold voxcpm_cpp``: VoxCPM.cpp's ``g * v / (||v|| + 1e-12)``), Snake ``alpha`` as ``(C, 1)``.
- ``--type f32`` (bf16 weights widened, as VoxCPM.cpp does), ``f16`` or ``q8_0``: what VoxCPM.cpp's
  quantizer converts (everything but norms, biases, alphas, ``stop.*``, 1-D tensors and
  ``locenc.special_token``; Q8_0 only where the row length is a multiple of 32, else kept F32).
  ``--vae f32``/``f16`` stores the VAE conv weights at that type; ``q8_0`` quantizes the regular
  VAE convs stored 2-D ``(out, in*k)`` and keeps depthwise, transposed and ``fc_logvar`` F16, as
  the quantizer does. ``--conv-layout 2d`` flattens the regular VAE convs at any type.

Usage: python convert_voxcpm_cpp.py SNAPSHOT_DIR OUT.gguf [--type f32|f16|q8_0] [--vae f32|f16|q8_0]
       [--conv-layout 3d|2d] [--fold torch|voxcpm_cpp]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import torch

from audiocpp.engine.tokenizer import add_to_gguf_writer, gguf_tokenizer_metadata

Q8 = gguf.GGMLQuantizationType.Q8_0
# upstream AudioVAEConfig defaults (voxcpm/modules/audiovae/audio_vae.py)
VAE_DEFAULTS = {"encoder_dim": 128, "encoder_rates": [2, 5, 8, 8], "latent_dim": 64, "decoder_dim": 1536,
                "decoder_rates": [8, 8, 5, 2], "depthwise": True, "sample_rate": 16000,
                "use_noise_block": False}
LAYER_PARTS = {
    "input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
STACK_PREFIX = {"base_lm": "", "residual_lm": "residual_lm.", "feat_encoder.encoder": "locenc.",
                "feat_decoder.estimator.decoder": "locdit."}
_LAYER = re.compile(r"^(base_lm|residual_lm|feat_encoder\.encoder|feat_decoder\.estimator\.decoder)"
                    r"\.layers\.(\d+)\.(.+)$")


def cpp_name(name: str) -> str:
    """An upstream tensor name -> its VoxCPM.cpp GGUF name."""
    m = _LAYER.match(name)
    if m:
        return f"{STACK_PREFIX[m[1]]}blk.{m[2]}.{LAYER_PARTS[m[3]]}"
    for stack, prefix in STACK_PREFIX.items():
        if name == f"{stack}.norm.weight":
            return f"{prefix}output_norm.weight"
    if name == "base_lm.embed_tokens.weight":
        return "token_embd.weight"
    head, _, rest = name.partition(".")
    if name.startswith("feat_encoder."):
        return "locenc." + name[len("feat_encoder."):]
    if name.startswith("feat_decoder.estimator."):
        return "locdit." + name[len("feat_decoder.estimator."):]
    if head == "fsq_layer":
        return "fsq." + rest
    if head in ("enc_to_lm_proj", "lm_to_dit_proj", "res_to_dit_proj", "fusion_concat_proj"):
        return f"proj.{head.removesuffix('_proj')}.{rest}"
    if head in ("stop_proj", "stop_head"):
        return "stop." + name
    if head == "audio_vae":
        return name
    raise ValueError(f"no VoxCPM.cpp name for {name!r}")


def fold(g: torch.Tensor, v: torch.Tensor, how: str) -> torch.Tensor:
    g, v = g.to(torch.float32), v.to(torch.float32)
    if how == "torch":
        return torch._weight_norm(v, g, 0)
    dims = tuple(d for d in range(v.dim()) if g.shape[d] == 1 and v.shape[d] > 1)
    norm = v.norm(dim=dims, keepdim=True) if dims else v.norm(keepdim=True)
    return g * v / (norm + 1e-12)


def read_snapshot(folder: Path, how: str) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    if (folder / "model.safetensors").is_file():
        from safetensors.torch import load_file

        weights = dict(load_file(str(folder / "model.safetensors")))
    else:
        ckpt = torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
        weights = dict(ckpt.get("state_dict", ckpt))
    vae_ckpt = torch.load(folder / "audiovae.pth", map_location="cpu", weights_only=True)
    vae = dict(vae_ckpt.get("state_dict", vae_ckpt))
    for name in [n for n in vae if n.endswith(".weight_g")]:
        stem = name[: -len(".weight_g")]
        vae[f"{stem}.weight"] = fold(vae.pop(name), vae.pop(f"{stem}.weight_v"), how)
    if not isinstance(config.get("audio_vae_config"), dict):
        config["audio_vae_config"] = dict(VAE_DEFAULTS)
    for name, value in vae.items():
        weights[f"audio_vae.{name}"] = value
    return config, weights


def flatten(config: dict[str, Any], prefix: str = "voxcpm") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        flat = f"{prefix}_{key}"
        if value is None:
            continue
        if isinstance(value, dict):
            out.update(flatten(value, flat))
        else:
            out[flat] = value
    return out


def _add_kv(writer: gguf.GGUFWriter, key: str, value: Any) -> None:
    if isinstance(value, bool):
        writer.add_uint32(key, int(value))
    elif isinstance(value, int):
        writer.add_uint32(key, value)
    elif isinstance(value, float):
        writer.add_float32(key, value)
    elif isinstance(value, str):
        writer.add_string(key, value)
    elif isinstance(value, list) and value:
        writer.add_array(key, [float(v) if isinstance(value[0], float) else v for v in value])


def _kept(name: str, tensor: torch.Tensor) -> bool:
    """Tensors VoxCPM.cpp's quantizer leaves at their stored type."""
    return (name.startswith("stop.") or tensor.dim() < 2 or name.endswith((".bias", ".alpha"))
            or name.endswith("norm.weight") or name == "locenc.special_token")


def _vae_kind(name: str, tensor: torch.Tensor) -> str:
    if name.endswith(".alpha") or name.endswith(".bias"):
        return "other"
    if tensor.dim() == 3 and tensor.shape[1] == 1 and tensor.shape[2] == 7:
        return "depthwise"
    if re.match(r"^audio_vae\.decoder\.model\.\d+\.block\.1\.weight$", name):
        return "transposed"
    if name == "audio_vae.encoder.fc_logvar.weight":
        return "unused"
    return "regular"


def _write(writer: gguf.GGUFWriter, name: str, tensor: torch.Tensor, kind: str) -> None:
    array = tensor.to(torch.float32).numpy() if tensor.is_floating_point() else tensor.numpy()
    array = np.ascontiguousarray(array)
    if kind == "q8_0" and array.shape[-1] % 32 == 0:
        data = gguf.quants.quantize(array.astype(np.float32), Q8)
        writer.add_tensor(name, data, raw_shape=data.shape, raw_dtype=Q8)
    elif kind == "f16" and tensor.is_floating_point():
        writer.add_tensor(name, array.astype(np.float16))
    else:
        writer.add_tensor(name, array)


def convert(folder: str | Path, out: str | Path, *, weight_type: str = "f32", vae_type: str | None = None,
            conv_layout: str = "3d", fold_with: str = "torch") -> Path:
    folder, out = Path(folder), Path(out)
    vae_type = vae_type or ("f16" if weight_type == "q8_0" else weight_type)
    config, weights = read_snapshot(folder, fold_with)
    lm = config["lm_config"]
    writer = gguf.GGUFWriter(str(out), arch="llama")
    writer.add_name(config.get("model_name") or folder.name)
    writer.add_file_type({"f32": 0, "f16": 1, "q8_0": 7}[weight_type])
    writer.add_context_length(lm["max_position_embeddings"])
    writer.add_embedding_length(lm["hidden_size"])
    writer.add_block_count(lm["num_hidden_layers"])
    writer.add_feed_forward_length(lm["intermediate_size"])
    writer.add_head_count(lm["num_attention_heads"])
    writer.add_head_count_kv(lm["num_key_value_heads"])
    writer.add_layer_norm_rms_eps(lm["rms_norm_eps"])
    writer.add_rope_freq_base(lm["rope_theta"])
    writer.add_vocab_size(lm["vocab_size"])
    add_to_gguf_writer(writer, gguf_tokenizer_metadata(folder, "llama_bpe", vocab_size=lm["vocab_size"]))
    for key, value in sorted(flatten(config).items()):
        _add_kv(writer, key, value)
    for name, tensor in weights.items():
        gname = cpp_name(name)
        if gname.startswith("audio_vae."):
            if gname.endswith(".alpha"):  # (1, C, 1) -> (C, 1), for ggml broadcasting
                tensor = tensor.reshape(-1, 1)
            vkind = _vae_kind(gname, tensor)
            if vkind == "regular" and (conv_layout == "2d" or vae_type == "q8_0") and tensor.dim() == 3:
                tensor = tensor.reshape(tensor.shape[0], -1)
            kind = "f32" if vkind == "other" else vae_type
            if vae_type == "q8_0" and vkind in ("depthwise", "transposed", "unused"):
                kind = "f16"
            _write(writer, gname, tensor, kind)
        else:
            _write(writer, gname, tensor, "f32" if _kept(gname, tensor) else weight_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("snapshot", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--type", choices=("f32", "f16", "q8_0"), default="f32")
    ap.add_argument("--vae", choices=("f32", "f16", "q8_0"), default=None,
                    help="default: f16 for q8_0, else --type")
    ap.add_argument("--conv-layout", choices=("3d", "2d"), default="3d")
    ap.add_argument("--fold", choices=("torch", "voxcpm_cpp"), default="torch")
    args = ap.parse_args(argv)
    convert(args.snapshot, args.out, weight_type=args.type, vae_type=args.vae, conv_layout=args.conv_layout,
            fold_with=args.fold)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
