"""VoxCPM1 configuration: ``config.json`` (the shared :class:`VoxCPMConfig`) or VoxCPM.cpp GGUF
metadata.

VoxCPM.cpp's converter (``scripts/convert_voxcpm_to_gguf.py``) flattens the whole ``config.json``
into ``voxcpm_<path>`` keys joined by ``_`` (``voxcpm_lm_config_rope_scaling_long_factor``),
booleans as u32 0/1, integers as u32, floats as f32, lists as arrays; ``null`` values are left
out. Underscores make the flat names ambiguous, so :func:`config_from_gguf` rebuilds the nested
dict from the fields upstream's pydantic models declare (:data:`SCHEMA`), not by splitting names.

f32 storage rounds config floats (``rms_norm_eps`` 1e-5 reads back as 9.99999975e-06). A value
that is exactly a float32 is read back as the shortest decimal that rounds to it, which is what
``config.json`` holds for every short literal (1e-05, 1.4, 1.0004), so the model computes with
the same Python floats as from the folder. Longer literals (more than ~7 significant digits)
cannot be recovered: the GGUF does not hold them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from audiocpp.engine.errors import ModelError
from audiocpp.families.voxcpm2.config import VoxCPMConfig

PREFIX = "voxcpm"

# Field -> kind ("int", "float", "bool", "str", "ints", "floats") or a nested schema.
_LOCAL = {"hidden_dim": "int", "ffn_dim": "int", "num_heads": "int", "num_layers": "int",
          "kv_channels": "int"}
SCHEMA: dict[str, Any] = {
    "architecture": "str", "patch_size": "int", "feat_dim": "int", "residual_lm_num_layers": "int",
    "residual_lm_no_rope": "bool", "scalar_quantization_latent_dim": "int",
    "scalar_quantization_scale": "int",
    "max_length": "int", "device": "str", "dtype": "str", "dit_mean_mode": "bool",
    "lm_config": {
        "bos_token_id": "int", "eos_token_id": "int", "hidden_size": "int", "intermediate_size": "int",
        "max_position_embeddings": "int", "num_attention_heads": "int", "num_hidden_layers": "int",
        "num_key_value_heads": "int", "rms_norm_eps": "float", "rope_theta": "float", "vocab_size": "int",
        "use_mup": "bool", "scale_emb": "float", "dim_model_base": "int", "scale_depth": "float",
        "kv_channels": "int", "no_rope": "bool",
        "rope_scaling": {"type": "str", "long_factor": "floats", "short_factor": "floats",
                         "original_max_position_embeddings": "int"},
    },
    "encoder_config": dict(_LOCAL),
    "dit_config": {
        **_LOCAL, "dit_mean_mode": "bool",
        "cfm_config": {"sigma_min": "float", "solver": "str", "t_scheduler": "str",
                       "training_cfg_rate": "float", "inference_cfg_rate": "float"},
    },
    "audio_vae_config": {
        "encoder_dim": "int", "encoder_rates": "ints", "latent_dim": "int", "decoder_dim": "int",
        "decoder_rates": "ints", "depthwise": "bool", "sample_rate": "int", "use_noise_block": "bool",
        "out_sample_rate": "int", "sr_bin_boundaries": "ints", "cond_type": "str", "cond_dim": "int",
        "cond_out_layer": "bool",
    },
}

# llama.* keys the converter also writes (GGUFWriter(arch="llama")): fallbacks for the LM fields.
_LLAMA_FALLBACKS = {
    "hidden_size": "llama.embedding_length", "num_hidden_layers": "llama.block_count",
    "intermediate_size": "llama.feed_forward_length", "num_attention_heads": "llama.attention.head_count",
    "num_key_value_heads": "llama.attention.head_count_kv",
    "rms_norm_eps": "llama.attention.layer_norm_rms_epsilon",
    "rope_theta": "llama.rope.freq_base", "max_position_embeddings": "llama.context_length",
    "vocab_size": "llama.vocab_size",
}


def is_voxcpm_cpp(metadata: Mapping[str, Any]) -> bool:
    return any(key.startswith(PREFIX + "_") for key in metadata)


def f32_literal(value: float) -> float:
    """``value`` as the shortest decimal that the same float32 holds, when it is a float32."""
    value = float(value)
    single = np.float32(value)
    if float(single) != value or not np.isfinite(single):
        return value
    return float(str(single))


def _typed(kind: str, value: Any, key: str) -> Any:
    try:
        if kind == "str":
            if not isinstance(value, str):
                raise TypeError
            return value
        if kind in ("ints", "floats"):
            items = list(np.asarray(value).reshape(-1).tolist()) if not isinstance(value, list) else value
            return [int(v) for v in items] if kind == "ints" else [f32_literal(v) for v in items]
        if isinstance(value, (list, str, np.ndarray)):
            raise TypeError
        if kind == "int":
            return int(value)
        if kind == "bool":
            return bool(int(value))
        return f32_literal(value)
    except (TypeError, ValueError):
        raise ModelError(f"GGUF metadata {key} has an unexpected value {value!r} (expected {kind})",
                         hint="the file does not look like a VoxCPM.cpp GGUF") from None


def _rebuild(metadata: Mapping[str, Any], schema: dict[str, Any], prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field, kind in schema.items():
        key = f"{prefix}_{field}"
        if isinstance(kind, dict):
            inner = _rebuild(metadata, kind, key)
            if inner:
                out[field] = inner
        elif key in metadata:
            out[field] = _typed(kind, metadata[key], key)
    return out


def config_dict_from_gguf(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The ``config.json`` dict a VoxCPM.cpp GGUF was converted from (as far as it holds it)."""
    raw = _rebuild(metadata, SCHEMA, PREFIX)
    lm = raw.setdefault("lm_config", {})
    for field, key in _LLAMA_FALLBACKS.items():
        if field not in lm and key in metadata:
            lm[field] = _typed(SCHEMA["lm_config"][field], metadata[key], key)
    raw.setdefault("architecture", "voxcpm")
    return raw


def config_from_gguf(metadata: Mapping[str, Any], where: str) -> VoxCPMConfig:
    if not is_voxcpm_cpp(metadata):
        raise ModelError(f"{where} has no voxcpm_* configuration keys",
                         hint="pass a VoxCPM.cpp GGUF, a voxcpm1 package or an HF snapshot folder")
    return VoxCPMConfig.from_dict(config_dict_from_gguf(metadata), where=f"{where} (voxcpm_* metadata)")
