"""Typed OmniVoice configs: the Qwen3 backbone + audio heads, and the Higgs Audio v2 codec.

Built from ``config.json`` / ``audio_tokenizer/config.json`` (with transformers' defaults for
missing fields, and DacConfig's derived ``upsampling_ratios`` / ``hidden_size``) or from the
metadata of omnivoice.cpp's two GGUFs (``omnivoice-lm`` and ``omnivoice-tokenizer``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from audiocpp.engine.config_values import as_bool, as_float, as_int, check_config, config_errors
from audiocpp.engine.errors import ModelError


@dataclass(frozen=True)
class LMConfig:
    """Qwen3 backbone dims (``llm_config`` in config.json)."""

    vocab_size: int = 151936
    hidden_size: int = 4096
    intermediate_size: int = 22016
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int = 32
    head_dim: int = 128
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    max_position_embeddings: int = 32768
    attention_bias: bool = False

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LMConfig:
        if d.get("model_type", "qwen3") != "qwen3":
            raise ModelError(f"OmniVoice's llm_config has model_type {d.get('model_type')!r}; "
                             "only qwen3 is supported")
        if d.get("hidden_act", "silu") != "silu":
            raise ModelError(f"unsupported hidden_act {d.get('hidden_act')!r} in llm_config (expected silu)")
        if d.get("use_sliding_window"):
            raise ModelError("llm_config enables sliding-window attention, which OmniVoice does not use")
        rope = d.get("rope_parameters") or d.get("rope_scaling") or {}
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type != "default":
            raise ModelError(f"unsupported rope_type {rope_type!r} in llm_config (expected default)")
        theta = rope.get("rope_theta", d.get("rope_theta", 10000.0))
        heads = as_int(d.get("num_attention_heads", cls.num_attention_heads))
        hidden = as_int(d.get("hidden_size", cls.hidden_size))
        head_dim = d.get("head_dim") or hidden // heads
        return cls(
            vocab_size=as_int(d.get("vocab_size", cls.vocab_size)),
            hidden_size=hidden,
            intermediate_size=as_int(d.get("intermediate_size", cls.intermediate_size)),
            num_hidden_layers=as_int(d.get("num_hidden_layers", cls.num_hidden_layers)),
            num_attention_heads=heads,
            num_key_value_heads=as_int(d.get("num_key_value_heads") or heads),
            head_dim=as_int(head_dim),
            rms_norm_eps=as_float(d.get("rms_norm_eps", cls.rms_norm_eps)),
            rope_theta=as_float(theta),
            max_position_embeddings=as_int(d.get("max_position_embeddings", cls.max_position_embeddings)),
            attention_bias=as_bool(d.get("attention_bias", False)),
        )


@dataclass(frozen=True)
class OmniVoiceConfig:
    llm: LMConfig
    audio_vocab_size: int = 1025
    audio_mask_id: int = 1024
    num_audio_codebook: int = 8
    audio_codebook_weights: tuple[int, ...] = (8, 8, 6, 6, 4, 4, 2, 2)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OmniVoiceConfig:
        if d.get("model_type", "omnivoice") != "omnivoice":
            raise ModelError(f"config.json has model_type {d.get('model_type')!r}, not 'omnivoice'")
        if "llm_config" not in d:
            raise ModelError("config.json has no llm_config", hint="is this a k2-fsa/OmniVoice checkpoint?")
        return cls(
            llm=LMConfig.from_dict(d["llm_config"]),
            audio_vocab_size=as_int(d.get("audio_vocab_size", 1025)),
            audio_mask_id=as_int(d.get("audio_mask_id", 1024)),
            num_audio_codebook=as_int(d.get("num_audio_codebook", 8)),
            audio_codebook_weights=tuple(d.get("audio_codebook_weights") or (8, 8, 6, 6, 4, 4, 2, 2)),
        )

    @classmethod
    def from_gguf(cls, md: dict[str, Any]) -> OmniVoiceConfig:
        """From omnivoice.cpp's ``omnivoice-lm`` GGUF metadata."""
        arch = md.get("general.architecture", "omnivoice-lm")

        def get(key: str, default: Any = None) -> Any:
            value = md.get(f"{arch}.{key}", default)
            if value is None:
                raise ModelError(f"GGUF metadata {arch}.{key} is missing",
                                 hint="is this an omnivoice.cpp LM GGUF?")
            return value

        heads = int(get("attention.head_count"))
        llm = LMConfig(
            vocab_size=int(get("vocab_size")),
            hidden_size=int(get("embedding_length")),
            intermediate_size=int(get("feed_forward_length")),
            num_hidden_layers=int(get("block_count")),
            num_attention_heads=heads,
            num_key_value_heads=int(get("attention.head_count_kv", heads)),
            head_dim=int(get("attention.key_length")),
            rms_norm_eps=float(get("attention.layer_norm_rms_epsilon", 1e-6)),
            rope_theta=float(get("rope.freq_base", 1e6)),
            max_position_embeddings=int(get("context_length", 40960)),
        )
        return cls(
            llm=llm,
            audio_vocab_size=int(md.get("omnivoice.audio_vocab_size", 1025)),
            audio_mask_id=int(md.get("omnivoice.audio_mask_id", 1024)),
            num_audio_codebook=int(md.get("omnivoice.num_audio_codebook", 8)),
            audio_codebook_weights=tuple(int(w) for w in md.get("omnivoice.audio_codebook_weights",
                                                                  (8, 8, 6, 6, 4, 4, 2, 2))),
        )


@dataclass(frozen=True)
class DacConfig:
    encoder_hidden_size: int = 64
    downsampling_ratios: tuple[int, ...] = (8, 5, 4, 2)
    decoder_hidden_size: int = 1024
    upsampling_ratios: tuple[int, ...] = (8, 5, 4, 2)
    hidden_size: int = 256

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DacConfig:
        """DacConfig semantics: ``upsampling_ratios`` and ``hidden_size`` derive from the
        encoder side unless given (HiggsAudio's config always gives them)."""
        enc = as_int(d.get("encoder_hidden_size", 64))
        down = tuple(as_int(r) for r in d.get("downsampling_ratios", (2, 4, 8, 8)))
        up = tuple(as_int(r) for r in d.get("upsampling_ratios", down[::-1]))
        hidden = as_int(d.get("hidden_size", enc * 2 ** len(down)))
        return cls(enc, down, as_int(d.get("decoder_hidden_size", 1536)), up, hidden)


@dataclass(frozen=True)
class HubertConfig:
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    layer_norm_eps: float = 1e-5
    feat_extract_norm: str = "group"
    feat_extract_activation: str = "gelu"
    conv_dim: tuple[int, ...] = (512,) * 7
    conv_stride: tuple[int, ...] = (5, 2, 2, 2, 2, 2, 2)
    conv_kernel: tuple[int, ...] = (10, 3, 3, 3, 3, 2, 2)
    conv_bias: bool = False
    num_conv_pos_embeddings: int = 128
    num_conv_pos_embedding_groups: int = 16
    feat_proj_layer_norm: bool = True
    do_stable_layer_norm: bool = False

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HubertConfig:
        if d.get("model_type", "hubert") != "hubert":
            raise ModelError(f"unsupported semantic model {d.get('model_type')!r} (expected hubert)")
        if d.get("conv_pos_batch_norm"):
            raise ModelError("HuBERT with conv_pos_batch_norm is not supported")
        kw: dict[str, Any] = {}
        for f in cls.__dataclass_fields__.values():
            if f.name in d:
                value = d[f.name]
                kw[f.name] = tuple(value) if isinstance(value, list) else value
        cfg = cls(**kw)
        for act in (cfg.hidden_act, cfg.feat_extract_activation):
            if act != "gelu":
                raise ModelError(f"unsupported HuBERT activation {act!r} (expected gelu)")
        if cfg.feat_extract_norm not in ("group", "layer"):
            raise ModelError(f"unsupported HuBERT feat_extract_norm {cfg.feat_extract_norm!r}")
        return cfg


@dataclass(frozen=True)
class CodecConfig:
    """``HiggsAudioV2TokenizerConfig`` and its derived properties."""

    acoustic: DacConfig = field(default_factory=DacConfig)
    semantic: HubertConfig = field(default_factory=HubertConfig)
    target_bandwidths: tuple[float, ...] = (0.5, 1, 1.5, 2, 4)
    sample_rate: int = 24000
    kernel_size: int = 3
    channel_ratios: tuple[float, ...] = (1, 1)
    strides: tuple[int, ...] = (1, 1)
    block_dilations: tuple[int, ...] = (1, 1)
    unit_kernel_size: int = 3
    codebook_size: int = 1024
    codebook_dim: int = 64
    semantic_sample_rate: int = 16000
    downsample_factor: int = 320
    #: Set when the quantizer count comes from elsewhere (omnivoice.cpp GGUFs lack the bandwidths).
    num_quantizers_override: int | None = None

    @property
    def hop_length(self) -> int:
        return math.prod(self.acoustic.downsampling_ratios)

    @property
    def frame_rate(self) -> int:
        return math.ceil(self.sample_rate / self.hop_length)

    @property
    def hidden_size(self) -> int:
        return self.acoustic.hidden_size + self.semantic.hidden_size

    @property
    def num_quantizers(self) -> int:
        if self.num_quantizers_override is not None:
            return self.num_quantizers_override
        nbits = math.ceil(math.log2(self.codebook_size))
        return int(1000 * self.target_bandwidths[-1] // (self.frame_rate * nbits))

    @property
    def semantic_downsample_factor(self) -> int:
        return int(self.hop_length / (self.sample_rate / self.semantic_sample_rate) / self.downsample_factor)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CodecConfig:
        if d.get("model_type", "higgs_audio_v2_tokenizer") != "higgs_audio_v2_tokenizer":
            raise ModelError(f"audio_tokenizer/config.json has model_type {d.get('model_type')!r}, "
                             "not 'higgs_audio_v2_tokenizer'")
        ac = d.get("acoustic_model_config")
        acoustic = DacConfig() if ac is None else DacConfig.from_dict(
            {"encoder_hidden_size": 64, "downsampling_ratios": [8, 5, 4, 2], "decoder_hidden_size": 1024,
             "upsampling_ratios": [8, 5, 4, 2], "hidden_size": 256, **ac})
        if ac is not None and ac.get("model_type", "dac") != "dac":
            raise ModelError(f"unsupported acoustic model {ac.get('model_type')!r} (expected dac)")
        semantic = HubertConfig.from_dict(d.get("semantic_model_config") or {})

        def tup(key: str, default: tuple) -> tuple:
            value = d.get(key)
            return default if value is None else tuple(value)

        return cls(
            acoustic=acoustic,
            semantic=semantic,
            target_bandwidths=tup("target_bandwidths", cls.target_bandwidths),
            sample_rate=as_int(d.get("sample_rate", 24000)),
            kernel_size=as_int(d.get("kernel_size", 3)),
            channel_ratios=tup("channel_ratios", (1, 1)),
            strides=tup("strides", (1, 1)),
            block_dilations=tup("block_dilations", (1, 1)),
            unit_kernel_size=as_int(d.get("unit_kernel_size", 3)),
            codebook_size=as_int(d.get("codebook_size", 1024)),
            codebook_dim=as_int(d.get("codebook_dim") or 64),
            semantic_sample_rate=as_int(d.get("semantic_sample_rate", 16000)),
            downsample_factor=as_int(d.get("downsample_factor", 320)),
        )

    @classmethod
    def from_gguf(cls, md: dict[str, Any], num_quantizers: int) -> CodecConfig:
        """From omnivoice.cpp's ``omnivoice-tokenizer`` GGUF metadata."""

        def get(key: str, default: Any = None) -> Any:
            value = md.get(f"omnivoice.{key}", default)
            if value is None:
                raise ModelError(f"GGUF metadata omnivoice.{key} is missing",
                                 hint="is this an omnivoice.cpp tokenizer (codec) GGUF?")
            return value

        def ints(key: str) -> tuple[int, ...]:
            return tuple(int(v) for v in get(key))

        acoustic = DacConfig(
            encoder_hidden_size=int(get("acoustic.encoder_hidden_size")),
            downsampling_ratios=ints("acoustic.downsampling_ratios"),
            decoder_hidden_size=int(get("acoustic.decoder_hidden_size")),
            upsampling_ratios=ints("acoustic.upsampling_ratios"),
            hidden_size=int(get("acoustic.hidden_size")),
        )
        semantic = HubertConfig(
            hidden_size=int(get("semantic.hidden_size")),
            num_hidden_layers=int(get("semantic.num_hidden_layers")),
            num_attention_heads=int(get("semantic.num_attention_heads")),
            intermediate_size=int(get("semantic.intermediate_size")),
            layer_norm_eps=float(get("semantic.layer_norm_eps", 1e-5)),
            conv_dim=ints("semantic.conv_dim"),
            conv_stride=ints("semantic.conv_stride"),
            conv_kernel=ints("semantic.conv_kernel"),
            num_conv_pos_embeddings=int(get("semantic.num_conv_pos_embeddings")),
            num_conv_pos_embedding_groups=int(get("semantic.num_conv_pos_embedding_groups")),
        )
        return cls(
            acoustic=acoustic,
            semantic=semantic,
            sample_rate=int(get("sample_rate", 24000)),
            codebook_size=int(get("codebook_size", 1024)),
            codebook_dim=int(get("codebook_dim", 64)),
            semantic_sample_rate=int(get("semantic_sample_rate", 16000)),
            downsample_factor=int(get("downsample_factor", 320)),
            num_quantizers_override=num_quantizers,
        )


def parse_configs(lm: Any, codec: Any, *, where: str) -> tuple[OmniVoiceConfig, CodecConfig]:
    """``config.json`` and ``audio_tokenizer/config.json`` of a checkpoint, checked: a value of the
    wrong type or an impossible size is one ModelError naming it."""
    parsed = []
    for raw, name, parse in ((lm, "config.json", OmniVoiceConfig.from_dict),
                             (codec, "audio_tokenizer/config.json", CodecConfig.from_dict)):
        label = f"{name} of {where}"
        if not isinstance(raw, dict):
            raise ModelError(f"{label} is not a JSON object", hint=f"is {where} an OmniVoice checkpoint?")
        with config_errors(label):
            config = parse(raw)
        check_config(config, label)
        parsed.append(config)
    return parsed[0], parsed[1]
