"""VoxCPM's config reader: upstream's defaults per architecture (``model/voxcpm2.py`` / ``model/voxcpm.py``
pydantic models, AudioVAE v2 / v1) for every key a config.json may leave out, and the real configs' sizes."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from audiocpp.engine.errors import ModelError
from audiocpp.families.voxcpm2.config import V1_VARIANT, V2_VARIANT, VoxCPMConfig
from tools.voxcpm1.checkpoint import REAL_05B
from tools.voxcpm2.checkpoint import REAL_V2

LM = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
      "num_hidden_layers": 2, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 512,
      "vocab_size": 550, "scale_emb": 12, "scale_depth": 1.4,
      "rope_scaling": {"short_factor": [1.0] * 8, "long_factor": [1.0] * 8,
                       "original_max_position_embeddings": 256}}
LOCAL = {"hidden_dim": 64, "num_heads": 4, "kv_channels": 16}
COMMON = {"encoder": {**LOCAL, "ffn_dim": 4096, "num_layers": 4},
          "cfm": {"sigma_min": 1e-6, "solver": "euler", "inference_cfg_rate": 1.0},
          "feat_dim": 64, "scalar_quantization_scale": 9, "dit_mean_mode": False, "dtype": "bfloat16"}
VAE = {"encoder_dim": 128, "encoder_rates": (2, 5, 8, 8), "latent_dim": 64, "depthwise": True,
       "sample_rate": 16000, "use_noise_block": False, "cond_type": "scale_bias", "cond_dim": 128,
       "cond_out_layer": False}
DEFAULTS = {
    "voxcpm2": {**COMMON, "patch_size": 4, "residual_lm_num_layers": 8, "residual_lm_no_rope": False,
                "scalar_quantization_latent_dim": 512, "max_length": 8192,
                "audio_vae": {**VAE, "version": 2, "decoder_dim": 2048, "decoder_rates": (8, 6, 5, 2, 2, 2),
                              "out_sample_rate": 48000, "sr_bin_boundaries": (20000, 30000, 40000)}},
    "voxcpm": {**COMMON, "patch_size": 2, "residual_lm_num_layers": 6, "residual_lm_no_rope": False,
               "scalar_quantization_latent_dim": 256, "max_length": 4096,
               "audio_vae": {**VAE, "version": 1, "decoder_dim": 1536, "decoder_rates": (8, 8, 5, 2),
                             "out_sample_rate": 16000, "sr_bin_boundaries": None}},
}


def minimal(arch: str, **changes: Any) -> dict[str, Any]:
    return {"architecture": arch, "lm_config": LM, "encoder_config": LOCAL,
            "dit_config": {**LOCAL, "cfm_config": {}}, **changes}


@pytest.mark.parametrize("arch", sorted(DEFAULTS))
def test_absent_keys_take_upstreams_defaults_per_architecture(arch: str) -> None:
    cfg = VoxCPMConfig.from_dict(minimal(arch))
    got = dataclasses.asdict(cfg)
    assert {k: got[k] for k in DEFAULTS[arch]} == DEFAULTS[arch]
    assert got["dit"] == got["encoder"]
    assert {k: got["lm"][k] for k in ("use_mup", "dim_model_base", "kv_channels", "no_rope")} == \
        {"use_mup": True, "dim_model_base": 256, "kv_channels": None, "no_rope": False}
    assert cfg.lm.rope_scaling.type == "longrope"
    assert cfg.variant == (V2_VARIANT if arch == "voxcpm2" else V1_VARIANT)


def test_v1_ignores_v2_only_keys_and_v2_reads_its_mean_mode_in_dit_config() -> None:
    vae = {"sample_rate": 44100, "out_sample_rate": 48000, "sr_bin_boundaries": [1], "cond_type": "add"}
    v1 = VoxCPMConfig.from_dict(minimal("VoxCPM", residual_lm_no_rope=True, dit_mean_mode=True,
                                        audio_vae_config=vae))
    assert (v1.architecture, v1.residual_lm_no_rope, v1.dit_mean_mode) == ("voxcpm", False, True)
    assert v1.sample_rate == 44100
    assert (v1.audio_vae.out_sample_rate, v1.audio_vae.sr_bin_boundaries, v1.audio_vae.cond_type) == \
        (44100, None, "scale_bias")
    v2 = VoxCPMConfig.from_dict(minimal("voxcpm2", dit_mean_mode=False, dit_config={
        **LOCAL, "dit_mean_mode": True, "cfm_config": {}}, audio_vae_config={"sr_bin_boundaries": None}))
    assert v2.dit_mean_mode and v2.audio_vae.sr_bin_boundaries is None


def test_the_real_configs_have_their_sizes() -> None:
    v2, v1 = VoxCPMConfig.from_dict(REAL_V2), VoxCPMConfig.from_dict(REAL_05B)
    assert (v2.sample_rate, v2.lm.head_dim, v2.audio_vae.chunk_size, v2.audio_vae.decode_chunk_size) == \
        (48000, 128, 640, 1920)
    assert (v2.residual_lm_config().no_rope, v2.lm.residual_scale, v2.cfm.inference_cfg_rate) == \
        (True, None, 2.0)
    assert (v1.sample_rate, v1.lm.head_dim, v1.patch_size, v1.audio_vae.decode_chunk_size) == \
        (16000, 64, 2, 640)
    assert (v1.lm.embedding_scale, v1.residual_lm_config().num_hidden_layers) == (12.0, 6)


@pytest.mark.parametrize(("changes", "words"), [
    ({"architecture": "voxcpm3"}, "unsupported VoxCPM architecture 'voxcpm3'"),
    ({"encoder_config": None}, "encoder is missing (key encoder_config)"),
    ({"dit_config": LOCAL}, "cfm is missing (key dit_config.cfm_config)"),
    ({"lm_config": {**LM, "scale_emb": None}}, "lm.scale_emb is missing (key lm_config.scale_emb)"),
    ({"dit_config": {**LOCAL, "cfm_config": {"solver": "rk4"}}},
     "cfm.solver must be one of 'euler', got 'rk4'"),
    ({"audio_vae_config": {"use_noise_block": True}}, "use_noise_block is not supported"),
    ({"audio_vae_config": {"cond_type": "film"}}, "audio_vae.cond_type must be one of"),
])
def test_a_bad_config_is_named(changes: dict[str, Any], words: str) -> None:
    with pytest.raises(ModelError) as info:
        VoxCPMConfig.from_dict(minimal("voxcpm2", **changes), where="v/config.json")
    assert str(info.value).startswith("v/config.json: ") and words in str(info.value)
