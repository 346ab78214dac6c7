"""Kokoro's config reader: hexgrad's v1.0 config.json, transformers' AlbertConfig defaults for what
``plbert`` leaves out (its vocabulary is ``n_token``), and the round trip through ``to_dict``."""

from __future__ import annotations

import dataclasses

import pytest

from audiocpp.engine.errors import ModelError
from audiocpp.families.kokoro.config import V1_0, AlbertConfig, ISTFTNetConfig, KokoroConfig

VOCAB = {"a": 1, "b": 2, "ə": 177}


def test_v1_0_with_albert_defaults() -> None:
    cfg = KokoroConfig.from_dict({**V1_0, "vocab": VOCAB})
    assert cfg.plbert == AlbertConfig(
        vocab_size=178, hidden_size=768, num_attention_heads=12, intermediate_size=2048,
        max_position_embeddings=512, num_hidden_layers=12, embedding_size=128, num_hidden_groups=1,
        inner_group_num=1, type_vocab_size=2, layer_norm_eps=1e-12)
    assert cfg.istftnet == ISTFTNetConfig((10, 6), (20, 12), 512, (3, 7, 11), ((1, 3, 5),) * 3, 20, 5)
    assert (cfg.n_token, cfg.hidden_dim, cfg.style_dim, cfg.n_layer, cfg.max_dur) == (178, 512, 128, 3, 50)
    assert (cfg.text_encoder_kernel_size, cfg.n_mels, cfg.dropout) == (5, 80, 0.2)
    assert (cfg.samples_per_duration_frame, cfg.max_phonemes, cfg.sample_rate) == (600, 510, 24000)
    assert KokoroConfig.from_dict(cfg.to_dict()) == cfg


def test_plbert_n_mels_and_dropout_may_be_left_out() -> None:
    raw = {k: v for k, v in V1_0.items() if k not in ("plbert", "n_mels", "dropout")}
    cfg = KokoroConfig.from_dict({**raw, "vocab": VOCAB, "n_token": 200})
    assert cfg.plbert == AlbertConfig(vocab_size=200)
    assert dataclasses.asdict(cfg.plbert) == {**dataclasses.asdict(KokoroConfig.from_dict(
        {**V1_0, "vocab": VOCAB}).plbert), "vocab_size": 200}
    assert (cfg.n_mels, cfg.dropout) == (80, 0.2)


@pytest.mark.parametrize(("changes", "words"), [
    ({"vocab": {}}, "'vocab' must be an object mapping phoneme symbols to token ids"),
    ({"vocab": {"ab": 1}}, "vocab key 'ab' must be one character"),
    ({"vocab": {"a": 178}}, "vocab ids must lie in 1..n_token-1 (177); 'a' does not"),
    ({"vocab": {"a": 1.5}}, "vocab['a'] must be an integer, got 1.5"),
    ({"n_token": None}, "n_token is missing"),
    ({"istftnet": {**V1_0["istftnet"], "resblock_dilation_sizes": [[1, 3]] * 3}},
     "three dilations per block"),
    ({"plbert": {"hidden_size": 100}}, "plbert.hidden_size 100 is not a multiple of num_attention_heads 12"),
    ({"hidden_dim": 511}, "hidden_dim must be even"),
])
def test_a_bad_config_is_named(changes: dict, words: str) -> None:
    with pytest.raises(ModelError) as info:
        KokoroConfig.from_dict({**V1_0, "vocab": VOCAB, **changes}, where="k/config.json")
    assert str(info.value).startswith("k/config.json: ") and words in str(info.value)
