"""Typed configuration of the VoxCPM models, read from upstream's ``config.json``.

One config class serves VoxCPM2 and VoxCPM1/1.5 (the ``voxcpm1`` family): the architectures
share every block and differ in a handful of switches collected in :class:`Variant`.
``VoxCPMConfig.from_dict`` applies upstream's per-architecture defaults (``model/voxcpm2.py`` /
``model/voxcpm.py`` pydantic models) and derives the sub-transformer configs exactly as upstream
deep-copies ``lm_config`` (the encoder, residual LM and DiT inherit the KV heads, rope settings, muP,
``scale_depth`` and ``rms_norm_eps`` of the base LM).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from audiocpp.engine.config_values import (
    as_bool,
    as_float,
    as_floats,
    as_int,
    as_ints,
    check_config,
    config_errors,
)
from audiocpp.engine.errors import ModelError

Architecture = Literal["voxcpm", "voxcpm2"]


@dataclass(frozen=True)
class RopeScaling:
    type: str
    short_factor: tuple[float, ...]
    long_factor: tuple[float, ...]
    original_max_position_embeddings: int


@dataclass(frozen=True)
class MiniCPMConfig:
    """One MiniCPM4 transformer stack (upstream ``MiniCPM4Config``)."""

    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    num_hidden_layers: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    rope_scaling: RopeScaling
    vocab_size: int
    use_mup: bool = True
    scale_emb: float = 1.0
    scale_depth: float = 1.0
    dim_model_base: int = 256
    kv_channels: int | None = None
    no_rope: bool = False

    @property
    def head_dim(self) -> int:
        return self.kv_channels if self.kv_channels else self.hidden_size // self.num_attention_heads

    @property
    def residual_scale(self) -> float | None:
        """muP residual-branch scale ``scale_depth / sqrt(num_layers)``; None without muP."""
        return self.scale_depth / math.sqrt(self.num_hidden_layers) if self.use_mup else None

    @property
    def embedding_scale(self) -> float:
        """What upstream multiplies text embeddings by (``scale_emb`` only with muP)."""
        return self.scale_emb if self.use_mup else 1.0

    def derive(self, **changes: Any) -> MiniCPMConfig:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class LocalConfig:
    """``encoder_config`` / ``dit_config``: the local transformers' own sizes."""

    hidden_dim: int = 1024
    ffn_dim: int = 4096
    num_heads: int = 16
    num_layers: int = 4
    kv_channels: int | None = None


@dataclass(frozen=True)
class CfmConfig:
    """What inference reads of ``cfm_config`` (the training fields are accepted and ignored)."""

    sigma_min: float = 1e-6
    solver: str = "euler"
    inference_cfg_rate: float = 1.0


@dataclass(frozen=True)
class AudioVAEConfig:
    """AudioVAE v1 (``audio_vae.py``) and v2 (``audio_vae_v2.py``) in one config.

    ``version`` selects the causal-conv padding (v2 left-pads ``2*pad - output_padding``,
    v1 ``2*pad``); sample-rate conditioning exists when ``sr_bin_boundaries`` is set (v2).
    """

    version: Literal[1, 2] = 2
    encoder_dim: int = 128
    encoder_rates: tuple[int, ...] = (2, 5, 8, 8)
    latent_dim: int = 64
    decoder_dim: int = 2048
    decoder_rates: tuple[int, ...] = (8, 6, 5, 2, 2, 2)
    depthwise: bool = True
    sample_rate: int = 16000
    out_sample_rate: int = 48000
    use_noise_block: bool = False
    sr_bin_boundaries: tuple[int, ...] | None = (20000, 30000, 40000)
    cond_type: str = "scale_bias"
    cond_dim: int = 128
    cond_out_layer: bool = False

    @property
    def chunk_size(self) -> int:
        """Encoder hop: input samples per latent frame."""
        return math.prod(self.encoder_rates)

    @property
    def decode_chunk_size(self) -> int:
        """Decoder hop: output samples per latent frame."""
        return math.prod(self.decoder_rates)


V1_VAE_DEFAULTS: dict[str, Any] = {
    "version": 1, "decoder_dim": 1536, "decoder_rates": (8, 8, 5, 2), "out_sample_rate": 16000,
    "sr_bin_boundaries": None,
}


@dataclass(frozen=True)
class Variant:
    """The switches that separate VoxCPM1/1.5 from VoxCPM2 in the shared code.

    - ``residual_fusion``: residual-LM input. ``concat_proj`` (v2) is
      ``fusion_concat_proj(cat(lm_out, audio_mask*feat_embed))``; ``add`` (v1) is
      ``lm_out + audio_mask*feat_embed``.
    - ``dit_mu``: DiT conditioning. ``concat`` (v2) concatenates ``lm_to_dit`` and
      ``res_to_dit`` and feeds them to the DiT as 2 prefix tokens; ``sum`` (v1) adds them and the
      DiT adds ``t`` to that single token.
    - ``reference_prefix``: v2 accepts an isolated reference (``[103, audio, 104]`` prefix).
    - ``prompt_trim``: how the offline output drops the prompt context patches. ``context``
      (v2): ``context_len`` patches of decoded audio, where ``context_len`` is the number of
      prompt patches kept as streaming context; ``fixed`` (v1): ``streaming_prefix_len - 1``
      patches whenever a prompt is present (v1's latents keep the context patches).
    - ``streaming``: ``stateful`` (v2) decodes each new patch with a stateful VAE decoder;
      ``window`` (v1) decodes the last ``streaming_prefix_len`` patches statelessly each step
      and keeps the last patch's samples.
    """

    residual_fusion: Literal["concat_proj", "add"] = "concat_proj"
    dit_mu: Literal["concat", "sum"] = "concat"
    reference_prefix: bool = True
    prompt_trim: Literal["context", "fixed"] = "context"
    streaming: Literal["stateful", "window"] = "stateful"
    streaming_prefix_len: int = 4


V2_VARIANT = Variant()
V1_VARIANT = Variant(
    residual_fusion="add", dit_mu="sum", reference_prefix=False, prompt_trim="fixed",
    streaming="window", streaming_prefix_len=3,
)

# Upstream's hard-coded special ids (model/voxcpm2.py), the same in v1.
AUDIO_START_TOKEN = 101
AUDIO_END_TOKEN = 102
REF_AUDIO_START_TOKEN = 103
REF_AUDIO_END_TOKEN = 104


@dataclass(frozen=True)
class VoxCPMConfig:
    architecture: Architecture
    lm: MiniCPMConfig
    encoder: LocalConfig
    dit: LocalConfig
    cfm: CfmConfig
    audio_vae: AudioVAEConfig
    patch_size: int = 4
    feat_dim: int = 64
    residual_lm_num_layers: int = 8
    residual_lm_no_rope: bool = False
    scalar_quantization_latent_dim: int = 512
    scalar_quantization_scale: int = 9
    dit_mean_mode: bool = False
    max_length: int = 8192
    dtype: str = "bfloat16"
    variant: Variant = field(default_factory=Variant)

    # -- derived stacks (as upstream deep-copies lm_config) ----------------------------------
    def residual_lm_config(self) -> MiniCPMConfig:
        return self.lm.derive(
            num_hidden_layers=self.residual_lm_num_layers, vocab_size=0, no_rope=self.residual_lm_no_rope
        )

    def _local(self, local: LocalConfig) -> MiniCPMConfig:
        return self.lm.derive(
            hidden_size=local.hidden_dim,
            intermediate_size=local.ffn_dim,
            num_attention_heads=local.num_heads,
            num_hidden_layers=local.num_layers,
            kv_channels=local.kv_channels,
            vocab_size=0,
        )

    def encoder_lm_config(self) -> MiniCPMConfig:
        return self._local(self.encoder)

    def dit_lm_config(self) -> MiniCPMConfig:
        return self._local(self.dit)

    @property
    def sample_rate(self) -> int:
        """The output rate (v2: the VAE's ``out_sample_rate``; v1: its ``sample_rate``)."""
        vae = self.audio_vae
        return vae.out_sample_rate if vae.version == 2 else vae.sample_rate

    # -- parsing ------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, raw: dict[str, Any], *, where: str = "config.json") -> VoxCPMConfig:
        if not isinstance(raw, dict):
            raise ModelError(f"{where} is not a JSON object",
                             hint="the config does not look like a VoxCPM config.json")
        with config_errors(where):
            config = cls._parse(raw, where)
        check_config(config, where, may_be_zero=("residual_lm_num_layers",))
        config.check_sizes(where)
        return config

    def check_sizes(self, where: str) -> None:
        """Sizes the networks need beyond being positive: LongRoPE needs one factor per frequency
        of every stack that uses rope, the DiT's time embedding an even width, and the VAE decoder
        halves its width at every upsampling stage."""
        vae = self.audio_vae
        if self.dit.hidden_dim % 2:
            raise ModelError(f"{where}: dit_config.hidden_dim {self.dit.hidden_dim} must be even "
                             "(the DiT's sinusoidal time embedding)",
                             hint="the config.json of the checkpoint is malformed")
        if vae.decoder_dim // 2 ** len(vae.decoder_rates) < 1:
            raise ModelError(f"{where}: audio_vae_config.decoder_dim {vae.decoder_dim} is too small to "
                             f"halve at each of its {len(vae.decoder_rates)} upsampling stages",
                             hint="the config.json of the checkpoint is malformed")
        stacks = {"lm_config": self.lm, "residual LM": self.residual_lm_config(),
                  "encoder_config": self.encoder_lm_config(), "dit_config": self.dit_lm_config()}
        rope = self.lm.rope_scaling
        for name, stack in stacks.items():
            want = stack.head_dim // 2
            if not stack.no_rope and (len(rope.short_factor) != want or len(rope.long_factor) != want):
                raise ModelError(f"{where}: lm_config.rope_scaling has {len(rope.short_factor)} short and "
                                 f"{len(rope.long_factor)} long factors; {name} needs head_dim/2 = {want}",
                                 hint="the config.json of the checkpoint is malformed")

    @classmethod
    def _parse(cls, raw: dict[str, Any], where: str) -> VoxCPMConfig:
        arch = str(raw.get("architecture", "voxcpm")).lower()
        if arch not in ("voxcpm", "voxcpm2"):
            raise ModelError(f"{where}: unsupported VoxCPM architecture {arch!r}",
                             hint="expected voxcpm or voxcpm2")
        v2 = arch == "voxcpm2"
        lm = _parse_lm(_require(raw, "lm_config", where), where)
        enc = _parse_local(raw.get("encoder_config"), "encoder_config", where)
        dit_raw = _require(raw, "dit_config", where)
        dit = _parse_local(dit_raw, "dit_config", where)
        cfm_raw = _require(dit_raw, "cfm_config", f"{where} dit_config")
        cfm = CfmConfig(
            sigma_min=as_float(cfm_raw.get("sigma_min", 1e-6)),
            solver=str(cfm_raw.get("solver", "euler")),
            inference_cfg_rate=as_float(cfm_raw.get("inference_cfg_rate", 1.0)),
        )
        if cfm.solver != "euler":
            raise ModelError(f"{where}: cfm solver {cfm.solver!r} is not supported",
                             hint="upstream only has euler")
        # v2 reads dit_config.dit_mean_mode; v1 reads a top-level dit_mean_mode.
        mean_mode = (as_bool(dit_raw.get("dit_mean_mode", False)) if v2
                     else as_bool(raw.get("dit_mean_mode", False)))
        vae = _parse_vae(raw.get("audio_vae_config"), v2, where)
        defaults: dict[str, Any] = (
            {"patch_size": 4, "residual_lm_num_layers": 8, "scalar_quantization_latent_dim": 512,
             "max_length": 8192}
            if v2
            else {"patch_size": 2, "residual_lm_num_layers": 6, "scalar_quantization_latent_dim": 256,
                  "max_length": 4096}
        )
        return cls(
            architecture=arch,  # type: ignore[arg-type]
            lm=lm,
            encoder=enc,
            dit=dit,
            cfm=cfm,
            audio_vae=vae,
            patch_size=as_int(raw.get("patch_size", defaults["patch_size"])),
            feat_dim=as_int(raw.get("feat_dim", 64)),
            residual_lm_num_layers=as_int(raw.get("residual_lm_num_layers",
                                                  defaults["residual_lm_num_layers"])),
            # v1's config has no such key: its residual LM always uses rope.
            residual_lm_no_rope=as_bool(raw.get("residual_lm_no_rope", False)) if v2 else False,
            scalar_quantization_latent_dim=as_int(
                raw.get("scalar_quantization_latent_dim", defaults["scalar_quantization_latent_dim"])
            ),
            scalar_quantization_scale=as_int(raw.get("scalar_quantization_scale", 9)),
            dit_mean_mode=mean_mode,
            max_length=as_int(raw.get("max_length", defaults["max_length"])),
            dtype=str(raw.get("dtype", "bfloat16")),
            variant=V2_VARIANT if v2 else V1_VARIANT,
        )


def _require(raw: Any, key: str, where: str) -> Any:
    if not isinstance(raw, dict) or key not in raw or raw[key] is None:
        raise ModelError(f"{where} has no {key!r}", hint="the config does not look like a VoxCPM config.json")
    return raw[key]


_LM_REQUIRED = (
    "hidden_size", "intermediate_size", "max_position_embeddings", "num_attention_heads",
    "num_hidden_layers", "num_key_value_heads", "rms_norm_eps", "rope_scaling", "vocab_size",
    "scale_emb", "scale_depth", "rope_theta",
)


def _parse_lm(raw: dict[str, Any], where: str) -> MiniCPMConfig:
    missing = [k for k in _LM_REQUIRED if k not in raw]
    if missing:
        raise ModelError(f"{where}: lm_config lacks {', '.join(missing)}",
                         hint="upstream's MiniCPM4Config requires them")
    rs = raw["rope_scaling"]
    if not isinstance(rs, dict):
        raise ModelError(f"{where}: lm_config.rope_scaling must be an object")
    for key in ("long_factor", "short_factor", "original_max_position_embeddings"):
        if key not in rs:
            raise ModelError(f"{where}: lm_config.rope_scaling lacks {key!r}")
    rope = RopeScaling(
        type=str(rs.get("type", "longrope")),
        short_factor=as_floats(rs["short_factor"]),
        long_factor=as_floats(rs["long_factor"]),
        original_max_position_embeddings=as_int(rs["original_max_position_embeddings"]),
    )
    kv = raw.get("kv_channels")
    return MiniCPMConfig(
        hidden_size=as_int(raw["hidden_size"]),
        intermediate_size=as_int(raw["intermediate_size"]),
        num_attention_heads=as_int(raw["num_attention_heads"]),
        num_key_value_heads=as_int(raw["num_key_value_heads"]),
        num_hidden_layers=as_int(raw["num_hidden_layers"]),
        rms_norm_eps=as_float(raw["rms_norm_eps"]),
        rope_theta=as_float(raw["rope_theta"]),
        max_position_embeddings=as_int(raw["max_position_embeddings"]),
        rope_scaling=rope,
        vocab_size=as_int(raw["vocab_size"]),
        use_mup=as_bool(raw.get("use_mup", True)),
        scale_emb=as_float(raw["scale_emb"]),
        scale_depth=as_float(raw["scale_depth"]),
        dim_model_base=as_int(raw.get("dim_model_base", 256)),
        kv_channels=None if kv is None else as_int(kv),
        no_rope=as_bool(raw.get("no_rope", False)),
    )


def _parse_local(raw: dict[str, Any] | None, key: str, where: str) -> LocalConfig:
    if raw is None:
        raise ModelError(f"{where} has no {key!r}")
    base = LocalConfig()
    kv = raw.get("kv_channels")
    return LocalConfig(
        hidden_dim=as_int(raw.get("hidden_dim", base.hidden_dim)),
        ffn_dim=as_int(raw.get("ffn_dim", base.ffn_dim)),
        num_heads=as_int(raw.get("num_heads", base.num_heads)),
        num_layers=as_int(raw.get("num_layers", base.num_layers)),
        kv_channels=None if kv is None else as_int(kv),
    )


def _parse_vae(raw: dict[str, Any] | None, v2: bool, where: str) -> AudioVAEConfig:
    base = AudioVAEConfig() if v2 else AudioVAEConfig(**V1_VAE_DEFAULTS)
    if raw is None:
        return base
    values: dict[str, Any] = {}
    for f in dataclasses.fields(AudioVAEConfig):
        if f.name == "version" or f.name not in raw:
            continue
        if not v2 and f.name in ("out_sample_rate", "sr_bin_boundaries", "cond_type", "cond_dim",
                                 "cond_out_layer"):
            continue  # v1's AudioVAEConfig has no such fields (pydantic ignores them)
        value = raw[f.name]
        if f.name in ("encoder_rates", "decoder_rates") \
                or (f.name == "sr_bin_boundaries" and value is not None):
            value = as_ints(value)
        values[f.name] = value
    vae = dataclasses.replace(base, **values)
    if not v2:
        vae = dataclasses.replace(vae, out_sample_rate=vae.sample_rate)
    if vae.use_noise_block:
        raise ModelError(f"{where}: audio_vae_config.use_noise_block is not supported",
                         hint="no released VoxCPM checkpoint uses the noise block")
    if vae.cond_type not in ("scale_bias", "scale_bias_init", "add", "concat"):
        raise ModelError(f"{where}: audio_vae_config.cond_type {vae.cond_type!r} is not supported")
    return vae
