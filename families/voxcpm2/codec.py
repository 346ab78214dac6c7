"""AudioVAE v1 and v2: the DAC-style causal convolutional VAE of VoxCPM.

Named as upstream (``voxcpm/modules/audiovae/audio_vae{,_v2}.py``) except that each
weight-normed convolution holds its folded ``weight`` (the tensor adapter folds the
checkpoint's ``weight_g`` / ``weight_v`` pairs once at load, which is what upstream's
``weight_norm`` hook computes before every call).

Switches (``AudioVAEConfig``): ``version`` 2 left-pads causal convs by ``2*pad - output_padding``,
v1 by ``2*pad`` (they differ for odd encoder strides); ``sr_bin_boundaries`` adds v2's
sample-rate conditioning in front of every decoder block (``scale_bias``, ``add`` or ``concat``).

Streaming decode (v2's ``StreamingVAEDecoder``): every causal conv keeps the last ``pad`` input
samples and every transposed conv the last ``(k-1)//stride`` input frames, so decoding patch by
patch gives the offline output.

Private, not ``engine.nn.layers.dac``: upstream's convs are the modules themselves (``block.1.weight``)
where the engine nests them (``.conv.weight``), so every layout would need renames; v1 left-pads
a strided conv by ``2 * ceil(stride / 2)`` (not ``kernel - stride``: they differ for odd
strides), upstream never right-pads a strided conv (the engine's ``CausalConv1d`` does, which
gives one more frame when the length is not a multiple of the stride), and the residual units
may be depthwise (``groups``), which the engine's ``ResidualUnit`` is not.
"""

from __future__ import annotations

import bisect
import math

import torch
import torch.nn.functional as F
from torch import nn

from audiocpp.engine.nn.layers.activations import Snake1d

from .config import AudioVAEConfig

States = dict[int, torch.Tensor]


class CausalConv1d(nn.Conv1d):
    """A conv left-padded by ``left_pad`` samples (no padding of its own)."""

    def __init__(self, in_ch: int, out_ch: int, kernel_size: int, *, stride: int = 1, dilation: int = 1,
                 groups: int = 1, bias: bool = True, left_pad: int = 0) -> None:
        super().__init__(in_ch, out_ch, kernel_size, stride=stride, dilation=dilation, groups=groups,
                         bias=bias)
        self.left_pad = left_pad

    def forward(self, x: torch.Tensor, states: States | None = None) -> torch.Tensor:
        p = self.left_pad
        if states is None or p == 0:
            return super().forward(F.pad(x, (p, 0)))
        key = id(self)
        prev = states.get(key)
        x_pad = torch.cat([prev, x], dim=-1) if prev is not None else F.pad(x, (p, 0))
        states[key] = x_pad[:, :, -p:]
        return super().forward(x_pad)


class CausalConvTranspose1d(nn.ConvTranspose1d):
    """A transposed conv whose last ``trim`` output samples are dropped."""

    def __init__(self, in_ch: int, out_ch: int, kernel_size: int, *, stride: int, trim: int) -> None:
        super().__init__(in_ch, out_ch, kernel_size, stride=stride)
        self.trim = trim

    def forward(self, x: torch.Tensor, states: States | None = None) -> torch.Tensor:
        ctx = (self.kernel_size[0] - 1) // self.stride[0]
        if states is None or ctx == 0:
            return super().forward(x)[..., : -self.trim]
        key = id(self)
        prev = states.get(key)
        x_full = torch.cat([prev, x], dim=-1) if prev is not None else F.pad(x, (ctx, 0))
        states[key] = x_full[:, :, -ctx:]
        out = super().forward(x_full)
        left = ctx * self.stride[0]
        return out[..., left : -self.trim] if self.trim > 0 else out[..., left:]


def _run(layers: nn.Module, x: torch.Tensor, states: States | None) -> torch.Tensor:
    for layer in layers:
        x = layer(x, states) if isinstance(layer, _STATEFUL) else layer(x)
    return x


def _stride_pad(stride: int, version: int) -> int:
    """Left padding of a stride conv (kernel 2*stride, padding ceil(stride/2), output_padding stride%2)."""
    pad = math.ceil(stride / 2)
    return 2 * pad - (stride % 2 if version == 2 else 0)


class CausalResidualUnit(nn.Module):
    def __init__(self, dim: int, dilation: int, groups: int = 1) -> None:
        super().__init__()
        pad = (7 - 1) * dilation // 2
        self.block = nn.Sequential(
            Snake1d(dim),
            CausalConv1d(dim, dim, 7, dilation=dilation, groups=groups, left_pad=2 * pad),
            Snake1d(dim),
            CausalConv1d(dim, dim, 1),
        )

    def forward(self, x: torch.Tensor, states: States | None = None) -> torch.Tensor:
        return x + _run(self.block, x, states)


class CausalEncoderBlock(nn.Module):
    def __init__(self, output_dim: int, stride: int, groups: int, version: int) -> None:
        super().__init__()
        input_dim = output_dim // 2
        self.block = nn.Sequential(
            CausalResidualUnit(input_dim, 1, groups),
            CausalResidualUnit(input_dim, 3, groups),
            CausalResidualUnit(input_dim, 9, groups),
            Snake1d(input_dim),
            CausalConv1d(input_dim, output_dim, 2 * stride, stride=stride,
                         left_pad=_stride_pad(stride, version)),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _run(self.block, x, None)


class CausalEncoder(nn.Module):
    def __init__(self, cfg: AudioVAEConfig) -> None:
        super().__init__()
        d = cfg.encoder_dim
        layers: list[nn.Module] = [CausalConv1d(1, d, 7, left_pad=6)]
        for stride in cfg.encoder_rates:
            d *= 2
            layers.append(CausalEncoderBlock(d, stride, d // 2 if cfg.depthwise else 1, cfg.version))
        self.block = nn.Sequential(*layers)
        self.fc_mu = CausalConv1d(d, cfg.latent_dim, 3, left_pad=2)
        self.fc_logvar = CausalConv1d(d, cfg.latent_dim, 3, left_pad=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The posterior mean (what upstream's ``encode`` returns)."""
        return self.fc_mu(_run(self.block, x, None))


class CausalDecoderBlock(nn.Module):
    def __init__(self, input_dim: int, output_dim: int, stride: int, groups: int) -> None:
        super().__init__()
        self.input_channels = input_dim
        self.block = nn.Sequential(
            Snake1d(input_dim),
            CausalConvTranspose1d(input_dim, output_dim, 2 * stride, stride=stride,
                                  trim=2 * math.ceil(stride / 2) - stride % 2),
            CausalResidualUnit(output_dim, 1, groups),
            CausalResidualUnit(output_dim, 3, groups),
            CausalResidualUnit(output_dim, 9, groups),
        )

    def forward(self, x: torch.Tensor, states: States | None = None) -> torch.Tensor:
        return _run(self.block, x, states)


class SampleRateConditionLayer(nn.Module):
    def __init__(self, input_dim: int, buckets: int, cond_type: str, cond_dim: int, out_layer: bool) -> None:
        super().__init__()
        self.cond_type = cond_type
        out_in = input_dim
        if cond_type in ("scale_bias", "scale_bias_init"):
            self.scale_embed = nn.Embedding(buckets, input_dim)
            self.bias_embed = nn.Embedding(buckets, input_dim)
        elif cond_type == "add":
            self.cond_embed = nn.Embedding(buckets, input_dim)
        elif cond_type == "concat":
            if not out_layer:
                raise ValueError("sample-rate conditioning 'concat' needs cond_out_layer")
            self.cond_embed = nn.Embedding(buckets, cond_dim)
            out_in = input_dim + cond_dim
        else:
            raise ValueError(f"unknown sample-rate conditioning {cond_type!r}")
        self.out_layer = (
            nn.Sequential(Snake1d(out_in), CausalConv1d(out_in, input_dim, 1)) if out_layer else nn.Identity()
        )

    def forward(self, x: torch.Tensor, bucket: torch.Tensor) -> torch.Tensor:
        if self.cond_type in ("scale_bias", "scale_bias_init"):
            x = x * self.scale_embed(bucket).unsqueeze(-1) + self.bias_embed(bucket).unsqueeze(-1)
        elif self.cond_type == "add":
            x = x + self.cond_embed(bucket).unsqueeze(-1)
        else:
            x = torch.cat([x, self.cond_embed(bucket).unsqueeze(-1).repeat(1, 1, x.shape[-1])], dim=1)
        return self.out_layer(x)


class CausalDecoder(nn.Module):
    def __init__(self, cfg: AudioVAEConfig) -> None:
        super().__init__()
        latent, channels = cfg.latent_dim, cfg.decoder_dim
        if cfg.depthwise:
            layers: list[nn.Module] = [
                CausalConv1d(latent, latent, 7, groups=latent, left_pad=6),
                CausalConv1d(latent, channels, 1),
            ]
        else:
            layers = [CausalConv1d(latent, channels, 7, left_pad=6)]
        output_dim = channels
        for i, stride in enumerate(cfg.decoder_rates):
            input_dim, output_dim = channels // 2**i, channels // 2 ** (i + 1)
            layers.append(CausalDecoderBlock(input_dim, output_dim, stride,
                                             output_dim if cfg.depthwise else 1))
        layers += [Snake1d(output_dim), CausalConv1d(output_dim, 1, 7, left_pad=6), nn.Tanh()]
        self.model = nn.ModuleList(layers)
        self.boundaries = cfg.sr_bin_boundaries
        if cfg.sr_bin_boundaries is not None:
            self.register_buffer("sr_bin_boundaries", torch.tensor(cfg.sr_bin_boundaries, dtype=torch.int32))
            buckets = len(cfg.sr_bin_boundaries) + 1
            self.sr_cond_model = nn.ModuleList(
                SampleRateConditionLayer(layer.input_channels, buckets, cfg.cond_type, cfg.cond_dim,
                                         cfg.cond_out_layer)
                if isinstance(layer, CausalDecoderBlock) else None
                for layer in layers
            )

    def bucket(self, sample_rate: int) -> int:
        """``torch.bucketize(sr, boundaries)`` (right=False) for a Python int."""
        assert self.boundaries is not None
        return bisect.bisect_left(list(self.boundaries), int(sample_rate))

    def forward(self, x: torch.Tensor, sample_rate: int | None = None,
                states: States | None = None) -> torch.Tensor:
        if self.boundaries is None:
            return _run(self.model, x, states)
        bucket = torch.tensor([self.bucket(sample_rate)], dtype=torch.long, device=x.device)
        for layer, cond in zip(self.model, self.sr_cond_model):
            if cond is not None:
                x = cond(x, bucket)
            x = layer(x, states) if isinstance(layer, _STATEFUL) else layer(x)
        return x


_STATEFUL = (CausalConv1d, CausalConvTranspose1d, CausalResidualUnit, CausalDecoderBlock)


class AudioVAE(nn.Module):
    def __init__(self, cfg: AudioVAEConfig) -> None:
        super().__init__()
        self.config = cfg
        self.encoder = CausalEncoder(cfg)
        self.decoder = CausalDecoder(cfg)
        self.latent_dim = cfg.latent_dim
        self.chunk_size = cfg.chunk_size
        self.decode_chunk_size = cfg.decode_chunk_size
        self.sample_rate = cfg.sample_rate
        self.out_sample_rate = cfg.out_sample_rate if cfg.version == 2 else cfg.sample_rate

    @torch.inference_mode()
    def encode(self, audio: torch.Tensor) -> torch.Tensor:
        """``audio`` ``(B, T)`` or ``(B, 1, T)`` at ``sample_rate`` -> latents ``(B, D, frames)``."""
        if audio.ndim == 2:
            audio = audio.unsqueeze(1)
        length = audio.shape[-1]
        right = math.ceil(length / self.chunk_size) * self.chunk_size - length
        return self.encoder(F.pad(audio, (0, right)))

    @torch.inference_mode()
    def decode(self, z: torch.Tensor, states: States | None = None) -> torch.Tensor:
        """Latents ``(B, D, frames)`` -> audio ``(B, 1, frames * decode_chunk_size)`` at the output rate."""
        return self.decoder(z, self.out_sample_rate, states)

    def streaming_decoder(self) -> StreamingDecoder:
        return StreamingDecoder(self)


class StreamingDecoder:
    """Decode latents chunk by chunk; the concatenation equals :meth:`AudioVAE.decode`."""

    def __init__(self, vae: AudioVAE) -> None:
        self.vae = vae
        self.states: States = {}

    def decode_chunk(self, z: torch.Tensor) -> torch.Tensor:
        return self.vae.decode(z, self.states)
