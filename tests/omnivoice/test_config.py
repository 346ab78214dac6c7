"""OmniVoice's config reader: transformers' defaults (Qwen3Config, HiggsAudioV2TokenizerConfig) for
absent keys, the LM's derived sizes and rope_theta's places, and omnivoice.cpp's GGUF metadata read
through the same reader with that converter's own defaults."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from audiocpp.engine.errors import ModelError
from audiocpp.families.omnivoice.config import CodecConfig, LMConfig, OmniVoiceConfig, parse_configs

LM_GGUF = {"general.architecture": "omnivoice-lm", "omnivoice-lm.vocab_size": 1100,
           "omnivoice-lm.embedding_length": 64, "omnivoice-lm.feed_forward_length": 128,
           "omnivoice-lm.block_count": 2, "omnivoice-lm.attention.head_count": 4,
           "omnivoice-lm.attention.key_length": 16}
CODEC_GGUF = {f"omnivoice.{k}": v for k, v in {
    "acoustic.encoder_hidden_size": 4, "acoustic.decoder_hidden_size": 64, "acoustic.hidden_size": 16,
    "acoustic.downsampling_ratios": np.array([8, 5, 4, 2, 3]),
    "acoustic.upsampling_ratios": np.array([8, 5, 4, 2, 3]),
    "semantic.hidden_size": 32, "semantic.num_hidden_layers": 2, "semantic.num_attention_heads": 2,
    "semantic.intermediate_size": 64, "semantic.conv_dim": np.array([16] * 7),
    "semantic.conv_stride": np.array([5, 2, 2, 2, 2, 2, 2]),
    "semantic.conv_kernel": np.array([10, 3, 3, 3, 3, 2, 2]),
    "semantic.num_conv_pos_embeddings": 16, "semantic.num_conv_pos_embedding_groups": 4}.items()}


def test_absent_keys_take_transformers_defaults() -> None:
    lm, codec = parse_configs({"llm_config": {}}, {}, where="the folder")
    assert dataclasses.asdict(lm) == {
        "llm": {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016,
                "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
                "head_dim": 128, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
                "max_position_embeddings": 32768, "attention_bias": False},
        "audio_vocab_size": 1025, "audio_mask_id": 1024, "num_audio_codebook": 8,
        "audio_codebook_weights": (8, 8, 6, 6, 4, 4, 2, 2)}
    semantic = dataclasses.asdict(codec.semantic)
    assert semantic == {
        "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
        "hidden_act": "gelu", "layer_norm_eps": 1e-5, "feat_extract_norm": "group",
        "feat_extract_activation": "gelu",
        "conv_dim": (512,) * 7, "conv_stride": (5, 2, 2, 2, 2, 2, 2), "conv_kernel": (10, 3, 3, 3, 3, 2, 2),
        "conv_bias": False, "num_conv_pos_embeddings": 128, "num_conv_pos_embedding_groups": 16,
        "feat_proj_layer_norm": True, "do_stable_layer_norm": False}
    assert {k: v for k, v in dataclasses.asdict(codec).items() if k != "semantic"} == {
        "acoustic": {"encoder_hidden_size": 64, "downsampling_ratios": (8, 5, 4, 2),
                     "decoder_hidden_size": 1024, "upsampling_ratios": (8, 5, 4, 2), "hidden_size": 256},
        "target_bandwidths": (0.5, 1.0, 1.5, 2.0, 4.0), "sample_rate": 24000, "kernel_size": 3,
        "channel_ratios": (1.0, 1.0), "strides": (1, 1), "block_dilations": (1, 1), "unit_kernel_size": 3,
        "codebook_size": 1024, "codebook_dim": 64, "semantic_sample_rate": 16000, "downsample_factor": 320,
        "num_quantizers_override": None}
    assert (codec.frame_rate, codec.num_quantizers, codec.hidden_size) == (75, 5, 1024)


@pytest.mark.parametrize(("llm", "expected"), [
    ({"num_attention_heads": 4, "hidden_size": 64}, {"num_key_value_heads": 4, "head_dim": 16}),
    ({"num_attention_heads": 4, "hidden_size": 64, "head_dim": None, "num_key_value_heads": 2},
     {"num_key_value_heads": 2, "head_dim": 16}),
    ({"rope_parameters": {"rope_type": "default", "rope_theta": 1e6}, "rope_theta": 5.0},
     {"rope_theta": 1e6}),
    ({"rope_scaling": {"type": "default", "rope_theta": 2e6}}, {"rope_theta": 2e6}),
    ({"rope_theta": 5.0}, {"rope_theta": 5.0}),
])
def test_the_lm_sizes_derived_and_rope_theta_found(llm: dict, expected: dict) -> None:
    cfg = OmniVoiceConfig.from_dict({"llm_config": llm})
    assert {k: getattr(cfg.llm, k) for k in expected} == expected


@pytest.mark.parametrize(("llm", "words"), [
    ({"model_type": "llama"}, "only qwen3 is supported"),
    ({"use_sliding_window": True}, "sliding-window attention"),
    ({"rope_parameters": {"rope_type": "yarn"}}, "unsupported rope_type 'yarn'"),
    ({"num_hidden_layers": -1},
     "llm.num_hidden_layers must be positive, got -1 (key llm_config.num_hidden_layers)"),
])
def test_an_unsupported_lm_is_named(llm: dict, words: str) -> None:
    with pytest.raises(ModelError) as info:
        parse_configs({"llm_config": llm}, {}, where="the folder")
    assert str(info.value).startswith("config.json of the folder: ") and words in str(info.value)


def test_gguf_metadata_takes_omnivoice_cpps_defaults() -> None:
    cfg = OmniVoiceConfig.from_gguf(LM_GGUF)
    assert cfg.llm == LMConfig(vocab_size=1100, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=4, head_dim=16, rms_norm_eps=1e-6,
                               rope_theta=1e6, max_position_embeddings=40960)
    assert cfg == OmniVoiceConfig(llm=cfg.llm)
    codec = CodecConfig.from_gguf(CODEC_GGUF, num_quantizers=9)
    assert codec.acoustic.downsampling_ratios == (8, 5, 4, 2, 3) and codec.semantic.conv_dim == (16,) * 7
    assert (codec.sample_rate, codec.codebook_dim, codec.semantic.layer_norm_eps, codec.num_quantizers) == \
        (24000, 64, 1e-5, 9)


def test_a_gguf_without_a_required_key_names_it() -> None:
    with pytest.raises(ModelError, match="GGUF metadata omnivoice-lm.vocab_size is missing"):
        OmniVoiceConfig.from_gguf({k: v for k, v in LM_GGUF.items() if not k.endswith("vocab_size")})
    with pytest.raises(ModelError, match="GGUF metadata omnivoice.semantic.conv_dim is missing"):
        CodecConfig.from_gguf({k: v for k, v in CODEC_GGUF.items() if not k.endswith("conv_dim")}, 9)
    with pytest.raises(ModelError, match=r"^lm.gguf \(GGUF metadata\): llm.head_dim: expected an integer"):
        OmniVoiceConfig.from_gguf({**LM_GGUF, "omnivoice-lm.attention.key_length": "16"}, where="lm.gguf")
