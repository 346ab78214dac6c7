"""VoxCPM.cpp's GGUF metadata read as the config.json it was converted from: ``voxcpm_<path>`` keys found
by the key paths VoxCPMConfig reads, u32 booleans, f32 floats back to their short literals, arrays,
llama.* fallbacks, and VoxCPM1's defaults for what the file leaves out."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from audiocpp.engine.errors import ModelError
from audiocpp.families.voxcpm1.config import config_dict_from_gguf, config_from_gguf
from audiocpp.families.voxcpm2.config import VoxCPMConfig
from tools.voxcpm1.checkpoint import REAL_05B, TINY_15
from tools.voxcpm1.convert_voxcpm_cpp import flatten


def as_gguf(value: Any) -> Any:
    """How the converter stores a value: u32 booleans and integers, f32 floats, arrays."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        return float(np.float32(value))
    if isinstance(value, list):
        return np.asarray(value, dtype=np.float32 if isinstance(value[0], float) else np.uint32)
    return value


def metadata(config: dict[str, Any]) -> dict[str, Any]:
    return {"general.architecture": "llama", **{k: as_gguf(v) for k, v in flatten(config).items()}}


@pytest.mark.parametrize("config", [TINY_15, REAL_05B], ids=["tiny_15", "real_05b"])
def test_the_metadata_reads_as_the_config_json(config: dict[str, Any]) -> None:
    assert config_from_gguf(metadata(config), "m.gguf") == VoxCPMConfig.from_dict(config)


def test_llama_keys_stand_in_and_an_absent_vae_is_v1s() -> None:
    config = copy.deepcopy(REAL_05B)
    del config["audio_vae_config"]
    md = metadata(config)
    md["llama.embedding_length"] = md.pop("voxcpm_lm_config_hidden_size")
    md["llama.attention.layer_norm_rms_epsilon"] = md.pop("voxcpm_lm_config_rms_norm_eps")
    raw = config_dict_from_gguf(md)
    assert raw["lm_config"]["hidden_size"] == 1024 and raw["lm_config"]["rms_norm_eps"] == 1e-5
    assert raw["lm_config"]["use_mup"] is True and raw["lm_config"]["scale_depth"] == 1.4
    assert "audio_vae_config" not in raw and "device" not in raw
    assert config_from_gguf(md, "m.gguf") == VoxCPMConfig.from_dict(config)


def test_bad_metadata_is_named() -> None:
    with pytest.raises(ModelError, match="m.gguf has no voxcpm_\\* configuration keys"):
        config_from_gguf({"general.architecture": "llama"}, "m.gguf")
    md = {**metadata(TINY_15), "voxcpm_lm_config_use_mup": "yes"}
    with pytest.raises(ModelError) as info:
        config_from_gguf(md, "m.gguf")
    assert str(info.value).startswith("m.gguf (voxcpm_* metadata): lm.use_mup: expected true or false")
