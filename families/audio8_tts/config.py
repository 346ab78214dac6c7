"""Typed configuration of Audio8 TTS ("arktts"), read from upstream's flat ``config.json``.

Field names and defaults are upstream's (``configuration_arktts.py`` at 14468db). Two groups
are ours:

- ``slow_backbone``: ``"qwen"`` (0.6B, the default when the key is absent) or ``"falcon_h1"``
  (0.1B; its own keys stay in ``raw`` for ``model/falcon_h1.py``).
- ``codec_post_*``: the codec ``post_module`` of the real ``codec.pth`` has 16 query heads,
  8 KV heads and an FFN of 1216, although the 14468db code builds 16/16/3072 (see
  ``shared/reference/audio8_tts.md`` section 2). They are config keys with the real values as
  defaults, so a checkpoint built by the 14468db code sets them to 16/16/3072.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from audiocpp.engine.errors import ModelError

SLOW_BACKBONES = ("qwen", "falcon_h1")


@dataclass(frozen=True)
class CodecConfig:
    """The 44.1 kHz codec: fixed architecture, configurable ``post_module`` size."""

    sample_rate: int = 44100
    frame_size: int = 2048
    post_n_layer: int = 8
    post_n_head: int = 16
    post_n_local_heads: int = 8
    post_intermediate_size: int = 1216
    #: The encoder / pre_module / post_module window transformers (not configurable upstream).
    encoder_transformer_layers: int = 4
    encoder_window: int = 512
    quantizer_window: int = 128
    pre_n_layer: int = 8
    pre_n_head: int = 16
    pre_intermediate_size: int = 3072


@dataclass(frozen=True)
class Audio8Config:
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
    semantic_begin_id: int = 151678
    semantic_end_id: int = 155773
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
    ras_window_size: int = 10
    ras_temperature: float = 1.0
    ras_top_p: float = 0.9
    eos_token_id: int = 151645
    pad_token_id: int = 151643
    slow_backbone: str = "qwen"
    codec: CodecConfig = field(default_factory=CodecConfig)
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def num_semantic(self) -> int:
        """Semantic tokens ``semantic_begin_id .. semantic_end_id`` (4096 in the real models)."""
        return self.semantic_end_id - self.semantic_begin_id + 1

    @property
    def sample_rate(self) -> int:
        return self.codec.sample_rate

    @classmethod
    def from_dict(cls, raw: dict[str, Any], *, where: str = "config.json") -> Audio8Config:
        if not isinstance(raw, dict):
            raise ModelError(f"{where} is not a JSON object")
        model_type = raw.get("model_type", "arktts")
        if model_type != "arktts":
            raise ModelError(f"{where} is a {model_type!r} config, not an Audio8 TTS ('arktts') one",
                             hint="pass an Audio8 TTS model folder or package")
        values: dict[str, Any] = {}
        try:
            for f in fields(cls):
                if f.name in ("codec", "raw") or f.name not in raw:
                    continue
                default = getattr(cls, f.name)
                values[f.name] = _coerce(raw[f.name], type(default), f.name)
            codec = CodecConfig(
                sample_rate=int(raw.get("codec_sample_rate", 44100)),
                frame_size=int(raw.get("codec_frame_size", 2048)),
                post_n_layer=int(raw.get("codec_post_n_layer", 8)),
                post_n_head=int(raw.get("codec_post_n_head", 16)),
                post_n_local_heads=int(raw.get("codec_post_n_local_heads", 8)),
                post_intermediate_size=int(raw.get("codec_post_intermediate_size", 1216)),
            )
        except (TypeError, ValueError) as exc:
            raise ModelError(f"{where}: {exc}", hint="the config.json of the checkpoint is malformed") from None
        cfg = cls(**values, codec=codec, raw=dict(raw))
        cfg.check(where)
        return cfg

    @classmethod
    def from_file(cls, path: str | Path) -> Audio8Config:
        try:
            raw = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ModelError(f"cannot read the Audio8 TTS config {path}: {exc}") from None
        return cls.from_dict(raw, where=str(path))

    def check(self, where: str = "config.json") -> None:
        problems = []
        if self.slow_backbone not in SLOW_BACKBONES:
            problems.append(f"slow_backbone {self.slow_backbone!r} is not one of {', '.join(SLOW_BACKBONES)}")
        if self.n_head % self.n_local_heads or self.fast_n_head % self.fast_n_local_heads:
            problems.append("query heads must be a multiple of KV heads")
        if not 0 <= self.semantic_begin_id <= self.semantic_end_id:
            problems.append("semantic ids are out of order")
        if self.num_semantic != self.codebook_size:
            problems.append(f"{self.num_semantic} semantic ids for codebooks of {self.codebook_size}")
        if self.head_dim % 2 or self.fast_head_dim % 2:
            problems.append("head dims must be even (RoPE pairs)")
        c = self.codec
        if c.post_n_head % c.post_n_local_heads:
            problems.append("codec_post_n_head must be a multiple of codec_post_n_local_heads")
        if problems:
            raise ModelError(f"{where}: " + "; ".join(problems), hint="the config.json does not describe an "
                             "Audio8 TTS model this version can run")


def _coerce(value: Any, kind: type, name: str) -> Any:
    if kind is bool:
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be true or false, got {value!r}")
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
            raise TypeError(f"{name} must be an integer, got {value!r}")
        return int(value)
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number, got {value!r}")
        return float(value)
    return str(value)
