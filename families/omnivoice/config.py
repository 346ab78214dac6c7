"""Typed OmniVoice configs: the Qwen3 backbone + audio heads, and the Higgs Audio v2 codec.

Read by ``engine.config_values`` from ``config.json`` / ``audio_tokenizer/config.json`` (transformers'
defaults for missing fields) or from the metadata of omnivoice.cpp's two GGUFs (``omnivoice-lm`` and
``omnivoice-tokenizer``), mapped to the same dict shape first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from audiocpp.engine.config_values import ConfigSection, config_error, nest, setting
from audiocpp.engine.errors import ModelError


@dataclass(frozen=True)
class LMConfig(ConfigSection):
    """Qwen3 backbone dims (``llm_config`` in config.json)."""

    vocab_size: int = 151936
    hidden_size: int = 4096
    intermediate_size: int = 22016
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int = setting(32, derive=lambda v, _: v["num_attention_heads"])
    head_dim: int = setting(128, derive=lambda v, _: v["hidden_size"] // v["num_attention_heads"])
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    max_position_embeddings: int = 32768
    attention_bias: bool = False

    @classmethod
    def prepare(cls, raw: dict[str, Any], where: str) -> dict[str, Any]:
        """Refuses what OmniVoice's Qwen3 never uses; ``rope_theta`` may sit in ``rope_parameters``
        (transformers 5) or ``rope_scaling``."""
        if raw.get("model_type", "qwen3") != "qwen3":
            raise ModelError(f"{where}: OmniVoice's llm_config has model_type {raw.get('model_type')!r}; "
                             "only qwen3 is supported")
        if raw.get("hidden_act", "silu") != "silu":
            raise ModelError(f"{where}: unsupported hidden_act {raw.get('hidden_act')!r} in llm_config "
                             "(expected silu)")
        if raw.get("use_sliding_window"):
            raise ModelError(f"{where}: llm_config enables sliding-window attention, which OmniVoice does "
                             "not use")
        rope = raw.get("rope_parameters") or raw.get("rope_scaling") or {}
        if not isinstance(rope, dict):
            raise config_error(where, f"llm_config.rope_parameters must be an object, got {rope!r}")
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type != "default":
            raise ModelError(f"{where}: unsupported rope_type {rope_type!r} in llm_config (expected default)")
        if "rope_theta" in rope:
            raw["rope_theta"] = rope["rope_theta"]
        return raw


@dataclass(frozen=True)
class OmniVoiceConfig(ConfigSection):
    llm: LMConfig = setting(key="llm_config")
    audio_vocab_size: int = 1025
    audio_mask_id: int = 1024
    num_audio_codebook: int = 8
    audio_codebook_weights: tuple[int, ...] = (8, 8, 6, 6, 4, 4, 2, 2)

    @classmethod
    def prepare(cls, raw: dict[str, Any], where: str) -> dict[str, Any]:
        if raw.get("model_type", "omnivoice") != "omnivoice":
            raise ModelError(f"{where} has model_type {raw.get('model_type')!r}, not 'omnivoice'")
        if "llm_config" not in raw:
            raise ModelError(f"{where} has no llm_config", hint="is this a k2-fsa/OmniVoice checkpoint?")
        return raw

    @classmethod
    def from_gguf(cls, md: dict[str, Any], where: str = "the LM GGUF") -> OmniVoiceConfig:
        """From omnivoice.cpp's ``omnivoice-lm`` GGUF metadata."""
        arch = md.get("general.architecture", "omnivoice-lm")
        table = {f"llm_config.{key}": (f"{arch}.{name}", absent) for key, (name, absent) in _GGUF_LM.items()}
        table.update({key: (f"omnivoice.{key}", None) for key in _GGUF_AUDIO})
        hint = "is this an omnivoice.cpp LM GGUF?"
        return cls.from_dict(_from_gguf(md, table, hint=hint), where=f"{where} (GGUF metadata)", hint=hint)


@dataclass(frozen=True)
class DacConfig(ConfigSection):
    """HiggsAudio's acoustic model (``acoustic_model_config``); its defaults stand for absent keys."""

    encoder_hidden_size: int = 64
    downsampling_ratios: tuple[int, ...] = (8, 5, 4, 2)
    decoder_hidden_size: int = 1024
    upsampling_ratios: tuple[int, ...] = (8, 5, 4, 2)
    hidden_size: int = 256

    @classmethod
    def prepare(cls, raw: dict[str, Any], where: str) -> dict[str, Any]:
        if raw.get("model_type", "dac") != "dac":
            raise ModelError(f"{where}: unsupported acoustic model {raw.get('model_type')!r} (expected dac)")
        return raw


@dataclass(frozen=True)
class HubertConfig(ConfigSection):
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
    def prepare(cls, raw: dict[str, Any], where: str) -> dict[str, Any]:
        if raw.get("model_type", "hubert") != "hubert":
            raise ModelError(f"{where}: unsupported semantic model {raw.get('model_type')!r} "
                             "(expected hubert)")
        if raw.get("conv_pos_batch_norm"):
            raise ModelError(f"{where}: HuBERT with conv_pos_batch_norm is not supported")
        return raw

    def check(self, where: str) -> None:
        for act in (self.hidden_act, self.feat_extract_activation):
            if act != "gelu":
                raise ModelError(f"{where}: unsupported HuBERT activation {act!r} (expected gelu)")
        if self.feat_extract_norm not in ("group", "layer"):
            raise ModelError(f"{where}: unsupported HuBERT feat_extract_norm {self.feat_extract_norm!r}")


@dataclass(frozen=True)
class CodecConfig(ConfigSection):
    """``HiggsAudioV2TokenizerConfig`` and its derived properties."""

    acoustic: DacConfig = setting(key="acoustic_model_config", factory=DacConfig)
    semantic: HubertConfig = setting(key="semantic_model_config", factory=HubertConfig)
    target_bandwidths: tuple[float, ...] = (0.5, 1.0, 1.5, 2.0, 4.0)
    sample_rate: int = 24000
    kernel_size: int = 3
    channel_ratios: tuple[float, ...] = (1.0, 1.0)
    strides: tuple[int, ...] = (1, 1)
    block_dilations: tuple[int, ...] = (1, 1)
    unit_kernel_size: int = 3
    codebook_size: int = 1024
    codebook_dim: int = 64
    semantic_sample_rate: int = 16000
    downsample_factor: int = 320
    #: Set when the quantizer count comes from elsewhere (omnivoice.cpp GGUFs lack the bandwidths).
    num_quantizers_override: int | None = setting(None, read=False)

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
    def prepare(cls, raw: dict[str, Any], where: str) -> dict[str, Any]:
        if raw.get("model_type", "higgs_audio_v2_tokenizer") != "higgs_audio_v2_tokenizer":
            raise ModelError(f"{where} has model_type {raw.get('model_type')!r}, "
                             "not 'higgs_audio_v2_tokenizer'")
        return raw

    @classmethod
    def from_gguf(cls, md: dict[str, Any], num_quantizers: int, where: str = "the codec GGUF") -> CodecConfig:
        """From omnivoice.cpp's ``omnivoice-tokenizer`` GGUF metadata."""
        hint = "is this an omnivoice.cpp tokenizer (codec) GGUF?"
        table = {key: (f"omnivoice.{name}", absent) for key, (name, absent) in _GGUF_CODEC.items()}
        config = cls.from_dict(_from_gguf(md, table, hint=hint), where=f"{where} (GGUF metadata)", hint=hint)
        return replace(config, num_quantizers_override=num_quantizers)


#: A GGUF key without which the file is not omnivoice.cpp's.
REQUIRED: Any = object()
#: omnivoice.cpp's LM GGUF: llm_config key -> (GGUF key after the architecture, the value when it is
#: absent: REQUIRED, or None to let the config's own default apply).
_GGUF_LM: dict[str, tuple[str, Any]] = {
    "vocab_size": ("vocab_size", REQUIRED), "hidden_size": ("embedding_length", REQUIRED),
    "intermediate_size": ("feed_forward_length", REQUIRED), "num_hidden_layers": ("block_count", REQUIRED),
    "num_attention_heads": ("attention.head_count", REQUIRED), "head_dim": ("attention.key_length", REQUIRED),
    "num_key_value_heads": ("attention.head_count_kv", None),
    "rms_norm_eps": ("attention.layer_norm_rms_epsilon", None), "rope_theta": ("rope.freq_base", 1e6),
    "max_position_embeddings": ("context_length", 40960),
}
#: The LM GGUF's ``omnivoice.<key>`` keys (config.json's top level).
_GGUF_AUDIO = ("audio_vocab_size", "audio_mask_id", "num_audio_codebook", "audio_codebook_weights")
#: omnivoice.cpp's codec GGUF: config key -> (GGUF key after ``omnivoice.``, as in ``_GGUF_LM``).
_GGUF_CODEC: dict[str, tuple[str, Any]] = {
    **{f"acoustic_model_config.{k}": (f"acoustic.{k}", REQUIRED) for k in (
        "encoder_hidden_size", "downsampling_ratios", "decoder_hidden_size", "upsampling_ratios",
        "hidden_size")},
    **{f"semantic_model_config.{k}": (f"semantic.{k}", REQUIRED) for k in (
        "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "conv_dim",
        "conv_stride", "conv_kernel", "num_conv_pos_embeddings", "num_conv_pos_embedding_groups")},
    "semantic_model_config.layer_norm_eps": ("semantic.layer_norm_eps", None),
    **{k: (k, None) for k in ("sample_rate", "codebook_size", "codebook_dim", "semantic_sample_rate",
                              "downsample_factor")},
}


def _from_gguf(md: dict[str, Any], table: dict[str, tuple[str, Any]], *, hint: str) -> dict[str, Any]:
    """The config dict that a GGUF's metadata stands for (``table``: dotted config key -> GGUF key and
    the value when it is absent)."""
    flat: dict[str, Any] = {}
    for path, (key, absent) in table.items():
        value = md.get(key, absent)
        if value is REQUIRED:
            raise ModelError(f"GGUF metadata {key} is missing", hint=hint)
        if value is not None:
            flat[path] = value.tolist() if hasattr(value, "tolist") else value
    return nest(flat)


def parse_configs(lm: Any, codec: Any, *, where: str) -> tuple[OmniVoiceConfig, CodecConfig]:
    """``config.json`` and ``audio_tokenizer/config.json`` of a checkpoint, checked: a value of the
    wrong type or an impossible size is one ModelError naming it."""
    return (OmniVoiceConfig.from_dict(lm, where=f"config.json of {where}"),
            CodecConfig.from_dict(codec, where=f"audio_tokenizer/config.json of {where}"))
