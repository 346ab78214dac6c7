"""VoxCPM1 configuration: ``config.json`` (the shared :class:`VoxCPMConfig`) or VoxCPM.cpp GGUF
metadata.

VoxCPM.cpp's converter (``scripts/convert_voxcpm_to_gguf.py``) flattens the whole ``config.json``
into ``voxcpm_<path>`` keys joined by ``_`` (``voxcpm_lm_config_rope_scaling_long_factor``),
booleans as u32 0/1, integers as u32, floats as f32, lists as arrays; ``null`` values are left
out. Underscores make the flat names ambiguous, so :func:`config_dict_from_gguf` rebuilds the nested
dict from the key paths :class:`VoxCPMConfig` reads (``engine.config_values.key_paths``), not by
splitting names, and ``VoxCPMConfig.from_dict`` reads it as it reads a ``config.json``.

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

from audiocpp.engine.config_values import key_paths, nest, scalar_kind
from audiocpp.engine.errors import ModelError
from audiocpp.families.voxcpm2.config import VoxCPMConfig

PREFIX = "voxcpm"
#: Read by VoxCPM2's ``prepare`` (its ``dit_mean_mode`` sits in ``dit_config``), so no field names it.
_EXTRA_KEYS = {"dit_config.dit_mean_mode": bool}
#: llama.* keys the converter also writes (GGUFWriter(arch="llama")): fallbacks for the LM fields.
_LLAMA_FALLBACKS = {f"lm_config.{field}": f"llama.{key}" for field, key in {
    "hidden_size": "embedding_length", "num_hidden_layers": "block_count",
    "intermediate_size": "feed_forward_length",
    "num_attention_heads": "attention.head_count", "num_key_value_heads": "attention.head_count_kv",
    "rms_norm_eps": "attention.layer_norm_rms_epsilon", "rope_theta": "rope.freq_base",
    "max_position_embeddings": "context_length", "vocab_size": "vocab_size",
}.items()}


def is_voxcpm_cpp(metadata: Mapping[str, Any]) -> bool:
    return any(key.startswith(PREFIX + "_") for key in metadata)


def f32_literal(value: float) -> float:
    """``value`` as the shortest decimal that the same float32 holds, when it is a float32."""
    value = float(value)
    single = np.float32(value)
    if float(single) != value or not np.isfinite(single):
        return value
    return float(str(single))


def _json_value(kind: type, value: Any) -> Any:
    """A GGUF value as config.json writes it: u32 booleans as booleans, f32 floats as their shortest
    literal, arrays as lists. Anything else stays as it is, for ``from_dict`` to refuse."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, list):
        return [_json_value(kind, v) for v in value]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if kind is bool and isinstance(value, int):
        return bool(value)
    return f32_literal(value) if kind is float else value


def config_dict_from_gguf(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The ``config.json`` dict a VoxCPM.cpp GGUF was converted from (as far as it holds it)."""
    flat: dict[str, Any] = {}
    for path, kind in {**key_paths(VoxCPMConfig), **_EXTRA_KEYS}.items():
        for key in (f"{PREFIX}_{path.replace('.', '_')}", _LLAMA_FALLBACKS.get(path)):
            if key in metadata:
                flat[path] = _json_value(scalar_kind(kind), metadata[key])
                break
    flat.setdefault("architecture", "voxcpm")
    return nest(flat)


def config_from_gguf(metadata: Mapping[str, Any], where: str) -> VoxCPMConfig:
    if not is_voxcpm_cpp(metadata):
        raise ModelError(f"{where} has no voxcpm_* configuration keys",
                         hint="pass a VoxCPM.cpp GGUF, a voxcpm1 package or an HF snapshot folder")
    return VoxCPMConfig.from_dict(config_dict_from_gguf(metadata), where=f"{where} (voxcpm_* metadata)",
                                  hint="the file does not look like a VoxCPM.cpp GGUF")
