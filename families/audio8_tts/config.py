"""Typed configuration of Audio8 TTS ("arktts"), read from upstream's flat ``config.json``.

Field names and defaults are upstream's (``configuration_arktts.py`` at 14468db). Two groups
are ours:

- ``slow_backbone``: ``"qwen"`` (0.6B, the default when the key is absent) or ``"falcon_h1"``
  (0.1B; its own keys stay in ``raw`` for ``model/falcon_h1.py``).
- ``codec_*``: the codec sizes (:class:`CodecConfig`). The ``post_module`` of the real
  ``codec.pth`` has 16 query heads, 8 KV heads and an FFN of 1216, although the 14468db code
  builds 16/16/3072 (see ``docs/families/audio8_tts.md``): the defaults are the
  real values, so a checkpoint built by the 14468db code sets ``codec_post_*`` to 16/16/3072.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from audiocpp.engine.config_values import ConfigSection, config_error, setting
from audiocpp.engine.errors import ModelError


@dataclass(frozen=True)
class CodecConfig(ConfigSection):
    """The 44.1 kHz codec. Upstream hard-codes its sizes (the defaults, except ``post_*``: the
    real ``codec.pth``'s); each field is read from the config key ``codec_<field>`` when present,
    which is how the tiny test checkpoints describe their scaled-down codec."""

    sample_rate: int = 44100
    frame_size: int = 2048
    encoder_dim: int = 64
    encoder_strides: tuple[int, ...] = (2, 4, 8, 8)
    encoder_transformer_layers: int = 4
    encoder_head_dim: int = 64
    encoder_window: int = 512
    latent_dim: int = 1024
    decoder_dim: int = 1536
    decoder_strides: tuple[int, ...] = (8, 8, 4, 2)
    quantizer_window: int = 128
    pre_n_layer: int = 8
    pre_n_head: int = 16
    pre_n_local_heads: int = 16
    pre_head_dim: int = 64
    pre_intermediate_size: int = 3072
    post_n_layer: int = 8
    post_n_head: int = 16
    post_n_local_heads: int = 8
    post_head_dim: int = 64
    post_intermediate_size: int = 1216
    semantic_codebook_size: int = 4096
    residual_codebooks: int = setting(9, zero_ok=True)
    residual_codebook_size: int = 1024
    codebook_dim: int = 8

    @property
    def num_codebooks(self) -> int:
        return 1 + self.residual_codebooks

    @property
    def hop(self) -> int:
        """Samples per encoder latent (the quantizer downsamples those by 4 into frames)."""
        return math.prod(self.encoder_strides)


@dataclass(frozen=True)
class Audio8Config(ConfigSection):
    """``ArkttsConfig`` fields (upstream names) plus ``slow_backbone`` and the codec sizes."""

    vocab_size: int = 155776
    dim: int = 896
    n_layer: int = 24
    n_head: int = 14
    n_local_heads: int = 2
    head_dim: int = 64
    intermediate_size: int = 4864
    max_seq_len: int = 2048
    rope_base: float = 1_000_000.0
    norm_eps: float = 1e-6
    attention_qkv_bias: bool = True
    attention_qk_norm: bool = False
    attention_o_bias: bool = False
    tie_word_embeddings: bool = True
    codebook_size: int = 4096
    num_codebooks: int = 10
    semantic_begin_id: int = setting(151678, zero_ok=True)
    semantic_end_id: int = setting(155773, zero_ok=True)
    n_fast_layer: int = 4
    fast_dim: int = 896
    fast_n_head: int = 14
    fast_n_local_heads: int = 2
    fast_head_dim: int = 64
    fast_intermediate_size: int = 4864
    fast_attention_qkv_bias: bool = False
    fast_attention_qk_norm: bool = False
    fast_attention_o_bias: bool = False
    norm_fastlayer_input: bool = True
    codec_filename: str = "codec.pth"
    ras_window_size: int = setting(10, zero_ok=True)
    ras_temperature: float = 1.0
    ras_top_p: float = 0.9
    eos_token_id: int = setting(151645, zero_ok=True)
    pad_token_id: int = setting(151643, zero_ok=True)
    slow_backbone: Literal["qwen", "falcon_h1"] = "qwen"
    codec: CodecConfig = setting(factory=CodecConfig, prefix="codec_")
    #: The whole config.json, for the backbone's own keys (``model/falcon_h1.py``).
    raw: dict[str, Any] = setting(factory=dict, read=False, derive=lambda _, raw: dict(raw), compare=False,
                                  repr=False)

    @property
    def num_semantic(self) -> int:
        """Semantic tokens ``semantic_begin_id .. semantic_end_id`` (4096 in the real models)."""
        return self.semantic_end_id - self.semantic_begin_id + 1

    @property
    def sample_rate(self) -> int:
        return self.codec.sample_rate

    @classmethod
    def prepare(cls, raw: dict[str, Any], where: str) -> dict[str, Any]:
        model_type = raw.get("model_type", "arktts")
        if model_type != "arktts":
            raise ModelError(f"{where} is a {model_type!r} config, not an Audio8 TTS ('arktts') one",
                             hint="pass an Audio8 TTS model folder or package")
        return raw

    @classmethod
    def from_file(cls, path: str | Path) -> Audio8Config:
        try:
            raw = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ModelError(f"cannot read the Audio8 TTS config {path}: {exc}") from None
        return cls.from_dict(raw, where=str(path))

    def check(self, where: str) -> None:
        problems = []
        if self.n_head % self.n_local_heads or self.fast_n_head % self.fast_n_local_heads:
            problems.append("query heads must be a multiple of KV heads")
        if not 0 <= self.semantic_begin_id <= self.semantic_end_id:
            problems.append("semantic ids are out of order")
        if self.num_semantic != self.codebook_size:
            problems.append(f"{self.num_semantic} semantic ids for codebooks of {self.codebook_size}")
        if self.head_dim % 2 or self.fast_head_dim % 2:
            problems.append("head dims must be even (RoPE pairs)")
        c = self.codec
        if c.post_n_head % c.post_n_local_heads or c.pre_n_head % c.pre_n_local_heads:
            problems.append("codec query heads must be a multiple of its KV heads")
        if c.hop * 4 != c.frame_size:
            problems.append(f"codec_frame_size {c.frame_size} is not 4 x the encoder hop {c.hop}")
        if c.num_codebooks != self.num_codebooks or c.semantic_codebook_size != self.codebook_size:
            problems.append("the codec's codebooks do not match num_codebooks / codebook_size")
        if problems:
            raise config_error(where, "; ".join(problems), hint="the config.json does not describe an "
                               "Audio8 TTS model this version can run")
