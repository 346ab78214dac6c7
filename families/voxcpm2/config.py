"""Typed configuration of the VoxCPM models, read from upstream's ``config.json``.

One config class serves VoxCPM2 and VoxCPM1/1.5 (the ``voxcpm1`` family): the architectures
share every block and differ in a handful of switches collected in :class:`Variant`.
``VoxCPMConfig.from_dict`` applies upstream's per-architecture defaults (``model/voxcpm2.py`` /
``model/voxcpm.py`` pydantic models) and derives the sub-transformer configs exactly as upstream
deep-copies ``lm_config`` (the encoder, residual LM and DiT inherit the KV heads, rope settings, muP,
``scale_depth`` and ``rms_norm_eps`` of the base LM). Every section is read by ``engine.config_values``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Literal

from audiocpp.engine.config_values import ConfigSection, config_error, setting
from audiocpp.engine.errors import ModelError

Architecture = Literal["voxcpm", "voxcpm2"]


@dataclass(frozen=True)
class RopeScaling(ConfigSection):
    short_factor: tuple[float, ...]
    long_factor: tuple[float, ...]
    original_max_position_embeddings: int
    type: str = "longrope"


@dataclass(frozen=True)
class MiniCPMConfig(ConfigSection):
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
    scale_emb: float
    scale_depth: float
    use_mup: bool = True
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
class LocalConfig(ConfigSection):
    """``encoder_config`` / ``dit_config``: the local transformers' own sizes."""

    hidden_dim: int = 1024
    ffn_dim: int = 4096
    num_heads: int = 16
    num_layers: int = 4
    kv_channels: int | None = None


@dataclass(frozen=True)
class CfmConfig(ConfigSection):
    """What inference reads of ``cfm_config`` (the training fields are accepted and ignored)."""

    sigma_min: float = 1e-6
    solver: Literal["euler"] = "euler"
    inference_cfg_rate: float = 1.0


@dataclass(frozen=True)
class AudioVAEConfig(ConfigSection):
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
    cond_type: Literal["scale_bias", "scale_bias_init", "add", "concat"] = "scale_bias"
    cond_dim: int = 128
    cond_out_layer: bool = False

    def check(self, where: str) -> None:
        if self.use_noise_block:
            raise config_error(where, "audio_vae_config.use_noise_block is not supported",
                               hint="no released VoxCPM checkpoint uses the noise block")

    @property
    def chunk_size(self) -> int:
        """Encoder hop: input samples per latent frame."""
        return math.prod(self.encoder_rates)

    @property
    def decode_chunk_size(self) -> int:
        """Decoder hop: output samples per latent frame."""
        return math.prod(self.decoder_rates)


#: VoxCPM1's AudioVAE (``audio_vae.py``) where it differs from v2's; v1 reads none of :data:`V2_VAE_KEYS`
#: and writes at its input rate.
V1_VAE_DEFAULTS: dict[str, Any] = {"version": 1, "decoder_dim": 1536, "decoder_rates": (8, 8, 5, 2),
                                   "sr_bin_boundaries": None}
V2_VAE_KEYS = ("out_sample_rate", "sr_bin_boundaries", "cond_type", "cond_dim", "cond_out_layer")
#: VoxCPM1's top-level defaults (``model/voxcpm.py``) where they differ from VoxCPM2's.
V1_DEFAULTS: dict[str, Any] = {"patch_size": 2, "residual_lm_num_layers": 6,
                               "scalar_quantization_latent_dim": 256, "max_length": 4096}


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
_VARIANTS = {"voxcpm": V1_VARIANT, "voxcpm2": V2_VARIANT}

# Upstream's hard-coded special ids (model/voxcpm2.py), the same in v1.
AUDIO_START_TOKEN = 101
AUDIO_END_TOKEN = 102
REF_AUDIO_START_TOKEN = 103
REF_AUDIO_END_TOKEN = 104


@dataclass(frozen=True)
class VoxCPMConfig(ConfigSection):
    architecture: Architecture
    lm: MiniCPMConfig = setting(key="lm_config")
    encoder: LocalConfig = setting(key="encoder_config")
    dit: LocalConfig = setting(key="dit_config")
    cfm: CfmConfig = setting(key="dit_config.cfm_config")
    audio_vae: AudioVAEConfig = setting(key="audio_vae_config", factory=AudioVAEConfig)
    patch_size: int = 4
    feat_dim: int = 64
    residual_lm_num_layers: int = setting(8, zero_ok=True)
    residual_lm_no_rope: bool = False
    scalar_quantization_latent_dim: int = 512
    scalar_quantization_scale: int = 9
    dit_mean_mode: bool = False
    max_length: int = 8192
    dtype: str = "bfloat16"
    variant: Variant = setting(factory=Variant, read=False, derive=lambda v, _: _VARIANTS[v["architecture"]])

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
    def prepare(cls, raw: dict[str, Any], where: str) -> dict[str, Any]:
        """One shape for both architectures: v1's defaults where they differ, v2's ``dit_mean_mode``
        (``dit_config.dit_mean_mode``; v1 reads a top-level one), v1's VAE without v2's keys."""
        arch = raw.get("architecture", "voxcpm")
        arch = arch.lower() if isinstance(arch, str) else arch
        if arch not in ("voxcpm", "voxcpm2"):
            raise ModelError(f"{where}: unsupported VoxCPM architecture {arch!r}",
                             hint="expected voxcpm or voxcpm2")
        raw["architecture"] = arch
        if arch == "voxcpm2":
            dit = raw.get("dit_config")
            raw["dit_mean_mode"] = dit.get("dit_mean_mode") if isinstance(dit, dict) else None
        else:
            raw.update({k: v for k, v in V1_DEFAULTS.items() if raw.get(k) is None})
            raw["residual_lm_no_rope"] = False  # v1's residual LM always uses rope
        vae = raw.get("audio_vae_config")
        if vae is None or isinstance(vae, dict):
            raw["audio_vae_config"] = _vae_dict(vae or {}, v2=arch == "voxcpm2")
        return raw

    def check(self, where: str) -> None:
        """Sizes the networks need beyond being positive: LongRoPE needs one factor per frequency
        of every stack that uses rope, the DiT's time embedding an even width, and the VAE decoder
        halves its width at every upsampling stage."""
        vae = self.audio_vae
        if self.dit.hidden_dim % 2:
            raise config_error(where, f"dit_config.hidden_dim {self.dit.hidden_dim} must be even "
                               "(the DiT's sinusoidal time embedding)")
        if vae.decoder_dim // 2 ** len(vae.decoder_rates) < 1:
            raise config_error(where, f"audio_vae_config.decoder_dim {vae.decoder_dim} is too small to "
                               f"halve at each of its {len(vae.decoder_rates)} upsampling stages")
        stacks = {"lm_config": self.lm, "residual LM": self.residual_lm_config(),
                  "encoder_config": self.encoder_lm_config(), "dit_config": self.dit_lm_config()}
        rope = self.lm.rope_scaling
        for name, stack in stacks.items():
            want = stack.head_dim // 2
            if not stack.no_rope and (len(rope.short_factor) != want or len(rope.long_factor) != want):
                raise config_error(where, f"lm_config.rope_scaling has {len(rope.short_factor)} short and "
                                   f"{len(rope.long_factor)} long factors; {name} needs head_dim/2 = {want}")


def _vae_dict(vae: dict[str, Any], *, v2: bool) -> dict[str, Any]:
    """``audio_vae_config`` with its architecture's ``version``; v1's with v1's defaults and without v2's
    keys (pydantic ignores them), its output at its input rate."""
    if v2:
        return {**vae, "version": 2}
    kept = {k: v for k, v in vae.items() if k not in V2_VAE_KEYS and v is not None}
    v1 = {**V1_VAE_DEFAULTS, **kept, "version": 1}
    return {**v1, "out_sample_rate": v1.get("sample_rate", AudioVAEConfig.sample_rate)}
