"""Audio8's config reader: the defaults are the real 0.6B config (upstream config.json and the real
codec.pth's sizes), the codec is read from ``codec_*`` keys, and the whole config.json stays in ``raw``."""

from __future__ import annotations

import pytest

from audiocpp.engine.errors import ModelError
from audiocpp.families.audio8_tts.config import Audio8Config, CodecConfig
from tools.audio8_tts.checkpoint import REAL, REAL_CODEC, TINY


def test_the_defaults_are_the_real_06b_config() -> None:
    cfg = Audio8Config.from_dict({})
    assert cfg == Audio8Config.from_dict({**REAL, **REAL_CODEC}) == Audio8Config()
    assert (cfg.slow_backbone, cfg.num_semantic, cfg.sample_rate, cfg.codec.hop, cfg.codec.num_codebooks) == \
        ("qwen", 4096, 44100, 512, 10)
    # the real codec.pth's post module, not the 16/16/3072 of upstream's code at 14468db
    codec = cfg.codec
    assert (codec.post_n_head, codec.post_n_local_heads, codec.post_intermediate_size) == (16, 8, 1216)


def test_the_codec_is_read_from_its_prefixed_keys() -> None:
    cfg = Audio8Config.from_dict(TINY)
    codec = {k.removeprefix("codec_"): tuple(v) if isinstance(v, list) else v
             for k, v in TINY.items() if k.startswith("codec_") and k != "codec_filename"}
    assert cfg.codec == CodecConfig(**codec)
    assert cfg.raw == TINY and cfg.codec_filename == "codec.pth" and cfg.semantic_begin_id == 312


@pytest.mark.parametrize(("changes", "words"), [
    ({"model_type": "qwen3"}, "is a 'qwen3' config, not an Audio8 TTS"),
    ({"slow_backbone": "mamba3"}, "slow_backbone must be one of 'qwen', 'falcon_h1', got 'mamba3'"),
    ({"codec_post_n_head": 0}, "codec.post_n_head must be positive, got 0 (key codec_post_n_head)"),
    ({"pad_token_id": -1}, "pad_token_id must be non-negative, got -1"),
    ({"codec_frame_size": 1024}, "codec_frame_size 1024 is not 4 x the encoder hop 512"),
])
def test_a_bad_config_is_named(changes: dict, words: str) -> None:
    with pytest.raises(ModelError, match=words.replace("(", r"\(").replace(")", r"\)")):
        Audio8Config.from_dict({**REAL, **changes}, where="config.json")
