"""The 44.1 kHz codec of Audio8 TTS (upstream ``ArkttsCodec``): ten codebooks per 2048-sample frame.

- ``encoder``: causal convs and residual units with Snake (strides 2, 4, 8, 8), a window
  transformer in the last block; 86 latent frames per second.
- ``quantizer``: see ``quantizer.py`` (4x down, VQs, 4x up).
- ``decoder``: causal transposed convs (strides 8, 8, 4, 2) and residual units, tanh. On the CPU it
  runs channels-last (``engine.nn.layers.dac``: each conv as GEMMs, about 1.5x faster than the direct
  convolutions, float32 rounding apart); the encoder keeps upstream's convolutions, so reference
  codes stay those of upstream.

Everything on the decode path is causal, so :class:`StreamingDecoder` decodes frames as they
arrive (convs keep their left context, the window transformer its keys) and its output,
concatenated, equals :meth:`ArkttsCodec.decode` up to float summation order.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

from audiocpp.engine.nn.layers.dac import (
    CausalConv1d,
    CausalConvTranspose1d,
    ResidualUnit,
    Snake1d,
    StreamState,
    forward_channels_last,
    stream_channels_last,
    stream_sequential,
)

from ..config import CodecConfig
from .quantizer import DownsampleQuantizer
from .transformer import WindowTransformer, WindowTransformerConfig


def _residual_units(dim: int) -> list[nn.Module]:
    return [ResidualUnit(dim, 1), ResidualUnit(dim, 3), ResidualUnit(dim, 9)]


class EncoderBlock(nn.Module):
    def __init__(self, dim: int, stride: int, transformer: WindowTransformerConfig | None) -> None:
        super().__init__()
        modules: list[nn.Module] = [*_residual_units(dim // 2), Snake1d(dim // 2),
                                    CausalConv1d(dim // 2, dim, kernel_size=2 * stride, stride=stride)]
        modules.append(WindowTransformer(transformer) if transformer is not None else nn.Identity())
        self.block = nn.Sequential(*modules)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


class Encoder(nn.Module):
    def __init__(self, cfg: CodecConfig) -> None:
        super().__init__()
        dim = cfg.encoder_dim
        modules: list[nn.Module] = [CausalConv1d(1, dim, kernel_size=7)]
        last = len(cfg.encoder_strides) - 1
        for i, stride in enumerate(cfg.encoder_strides):
            dim *= 2
            transformer = None
            if i == last and cfg.encoder_transformer_layers:
                transformer = WindowTransformerConfig(
                    n_layer=cfg.encoder_transformer_layers, n_head=dim // cfg.encoder_head_dim, dim=dim,
                    intermediate_size=dim * 3, head_dim=cfg.encoder_head_dim, window=cfg.encoder_window)
            modules.append(EncoderBlock(dim, stride, transformer))
        modules += [Snake1d(dim), CausalConv1d(dim, cfg.latent_dim, kernel_size=3)]
        self.block = nn.Sequential(*modules)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


class DecoderBlock(nn.Module):
    def __init__(self, input_dim: int, output_dim: int, stride: int) -> None:
        super().__init__()
        self.block = nn.Sequential(Snake1d(input_dim),
                                   CausalConvTranspose1d(input_dim, output_dim, kernel_size=2 * stride,
                                                         stride=stride),
                                   *_residual_units(output_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)

    def stream(self, x: torch.Tensor, state: StreamState) -> torch.Tensor:
        return stream_sequential(self.block, x, state)

    def forward_cl(self, x: torch.Tensor) -> torch.Tensor:
        return forward_channels_last(self.block, x)

    def stream_cl(self, x: torch.Tensor, state: StreamState) -> torch.Tensor:
        return stream_channels_last(self.block, x, state)


class Decoder(nn.Module):
    def __init__(self, cfg: CodecConfig) -> None:
        super().__init__()
        channels = cfg.decoder_dim
        modules: list[nn.Module] = [CausalConv1d(cfg.latent_dim, channels, kernel_size=7)]
        output_dim = channels
        for i, stride in enumerate(cfg.decoder_strides):
            output_dim = channels // 2 ** (i + 1)
            modules.append(DecoderBlock(channels // 2 ** i, output_dim, stride))
        modules += [Snake1d(output_dim), CausalConv1d(output_dim, 1, kernel_size=7), nn.Tanh()]
        self.model = nn.Sequential(*modules)

    @property
    def dtype(self) -> torch.dtype:
        """The dtype its convolutions multiply in (their weights'). On the CPU activations, biases
        and Snake stay float32 whatever it is (``engine.nn.layers.dac``: 16-bit GEMMs, one rounding per
        conv output); elsewhere the whole decoder computes in it."""
        return self.model[0].conv.weight.dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type != "cpu":
            return self.model(x.to(self.dtype))
        return forward_channels_last(self.model, x.transpose(1, 2).contiguous()).transpose(1, 2)

    def stream(self, x: torch.Tensor, state: StreamState) -> torch.Tensor:
        if x.device.type != "cpu":
            return stream_sequential(self.model, x.to(self.dtype), state)
        return stream_channels_last(self.model, x.transpose(1, 2).contiguous(), state).transpose(1, 2)

    def copy_in(self, dtype: torch.dtype) -> Decoder:
        """A copy whose convolutions multiply in ``dtype`` (``codec_dtype=bfloat16``: about 1.6x
        faster decoding on CPUs with bf16 units; drift in docs/families/audio8_tts.md); this decoder
        itself when they already do."""
        if dtype == self.dtype:
            return self
        with torch.inference_mode(False), torch.no_grad():  # plain tensors: dac relays them in place
            low = copy.deepcopy(self)
            if self.model[0].conv.weight.device.type != "cpu":
                return low.to(dtype)
            # the last Snake and conv (to one channel: little work) stay float32: float32 audio
            for module in low.model[:-3].modules():
                if isinstance(module, (CausalConv1d, CausalConvTranspose1d)):
                    module.conv.weight.data = module.conv.weight.data.to(dtype)  # keeps relaid strides
                elif isinstance(module, Snake1d):  # each feeds a conv, which rounds its input anyway
                    module.out_dtype = dtype
        return low


class ArkttsCodec(nn.Module):
    """Encode 44.1 kHz mono audio to ten codebooks and decode them back (float32)."""

    def __init__(self, cfg: CodecConfig | None = None) -> None:
        super().__init__()
        self.cfg = cfg or CodecConfig()
        self.sample_rate = self.cfg.sample_rate
        self.frame_length = self.cfg.frame_size
        self.encoder = Encoder(self.cfg)
        self.quantizer = DownsampleQuantizer(self.cfg)
        self.decoder = Decoder(self.cfg)

    @torch.inference_mode()
    def encode(self, audio: torch.Tensor) -> torch.Tensor:
        """Codes ``[B, 10, ceil(n / 2048)]`` of audio ``[B, n]`` or ``[B, 1, n]`` (zero-padded to whole
        frames)."""
        if audio.ndim == 2:
            audio = audio[:, None]
        if audio.ndim != 3 or audio.shape[1] != 1:
            raise ValueError(f"audio must have shape [B, 1, samples], got {tuple(audio.shape)}")
        length = audio.shape[-1]
        right = math.ceil(length / self.frame_length) * self.frame_length - length
        if right:
            audio = F.pad(audio, (0, right))
        return self.quantizer.encode(self.encoder(audio))

    @torch.inference_mode()
    def decode(self, codes: torch.Tensor, decoder: Decoder | None = None) -> torch.Tensor:
        """Audio ``[B, 1, 2048 * T]`` of codes ``[B, 10, T]`` by ``decoder`` (default: this codec's
        float32 one; or one of its :meth:`Decoder.copy_in`, whose audio is float32 on the CPU)."""
        if codes.ndim != 3 or codes.shape[1] != self.cfg.num_codebooks:
            raise ValueError(f"codes must have shape [B, {self.cfg.num_codebooks}, T], "
                             f"got {tuple(codes.shape)}")
        return (decoder or self.decoder)(self.quantizer.decode(codes.long()))


class StreamingDecoder:
    """Decodes one utterance frame group by frame group; ``push(codes [B, 10, n])`` returns the
    ``2048 * n`` samples those frames complete."""

    def __init__(self, codec: ArkttsCodec, decoder: Decoder | None = None) -> None:
        self.codec = codec
        self.decoder = decoder or codec.decoder
        self.state: StreamState = {}

    @torch.inference_mode()
    def push(self, codes: torch.Tensor) -> torch.Tensor:
        if codes.shape[-1] == 0:
            return codes.new_zeros((codes.shape[0], 1, 0), dtype=torch.float32)
        latents = self.codec.quantizer.stream(codes.long(), self.state)
        return self.decoder.stream(latents, self.state)
