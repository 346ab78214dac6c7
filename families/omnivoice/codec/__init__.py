"""The Higgs Audio v2 audio tokenizer (``transformers.HiggsAudioV2TokenizerModel``):
24 kHz audio <-> 8 codebooks of RVQ codes at 25 frames per second.

Encode: HuBERT on 16 kHz audio (mean of all hidden states, every 2nd frame) through the
semantic encoder convs, concatenated with the DAC acoustic encoder's frames, ``fc``, RVQ.
Decode: RVQ sum, ``fc2``, DAC decoder.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from audiocpp.engine.audio.resample import resample

from ..config import CodecConfig
from .dac import DacDecoder, DacEncoder
from .hubert import HubertModel
from .rvq import ResidualVectorQuantizer


class ResidualUnit(nn.Module):
    def __init__(self, cfg: CodecConfig, in_ch: int, out_ch: int, dilation: int) -> None:
        super().__init__()
        pad = ((cfg.unit_kernel_size - 1) // 2) * dilation
        self.conv1 = nn.Conv1d(in_ch, out_ch, cfg.unit_kernel_size, padding=pad, dilation=dilation,
                               bias=False)
        self.conv2 = nn.Conv1d(out_ch, out_ch, kernel_size=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(F.elu(self.conv1(F.elu(x))))


class SemanticEncoderBlock(nn.Module):
    def __init__(self, cfg: CodecConfig, in_ch: int, out_ch: int, stride: int) -> None:
        super().__init__()
        self.res_units = nn.ModuleList(ResidualUnit(cfg, in_ch, in_ch, d) for d in cfg.block_dilations)
        kernel = 3 if stride == 1 else 2 * stride
        self.conv = nn.Conv1d(in_ch, out_ch, kernel_size=kernel, stride=stride, padding=(kernel - 1) // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for unit in self.res_units:
            x = unit(x)
        return self.conv(x)


class SemanticEncoder(nn.Module):
    def __init__(self, cfg: CodecConfig) -> None:
        super().__init__()
        if len(cfg.strides) != len(cfg.channel_ratios):
            raise ValueError("the codec config needs as many strides as channel_ratios")
        hidden = cfg.semantic.hidden_size
        self.conv = nn.Conv1d(hidden, hidden, cfg.kernel_size, 1, cfg.kernel_size // 2, bias=False)
        blocks, in_ch = [], hidden
        for ratio, stride in zip(cfg.channel_ratios, cfg.strides):
            out_ch = int(hidden * ratio)
            blocks.append(SemanticEncoderBlock(cfg, in_ch, out_ch, stride))
            in_ch = out_ch
        self.conv_blocks = nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        for block in self.conv_blocks:
            x = block(x)
        return x


class HiggsAudioV2Codec(nn.Module):
    """Module names as in the checkpoint (``decoder_semantic`` and ``fc1`` are training-only
    and not built)."""

    def __init__(self, cfg: CodecConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.acoustic_encoder = DacEncoder(cfg.acoustic)
        self.acoustic_decoder = DacDecoder(cfg.acoustic)
        self.encoder_semantic = SemanticEncoder(cfg)
        self.semantic_model = HubertModel(cfg.semantic)
        self.fc = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.fc2 = nn.Linear(cfg.hidden_size, cfg.acoustic.hidden_size)
        self.quantizer = ResidualVectorQuantizer(cfg.num_quantizers, cfg.hidden_size, cfg.codebook_size,
                                                 cfg.codebook_dim)

    @property
    def sample_rate(self) -> int:
        return self.cfg.sample_rate

    @property
    def hop_length(self) -> int:
        return self.cfg.hop_length

    @property
    def frame_rate(self) -> int:
        return self.cfg.frame_rate

    def semantic_features(self, wav: torch.Tensor) -> torch.Tensor:
        """(B, 1, N) audio at the codec rate -> (B, T, semantic hidden)."""
        if self.cfg.sample_rate != self.cfg.semantic_sample_rate:
            wav = resample(wav, self.cfg.sample_rate, self.cfg.semantic_sample_rate)
        x = F.pad(wav[:, 0, :], (160, 160))
        states = self.semantic_model(x)
        features = torch.stack(states, dim=1).mean(dim=1)
        step = self.cfg.semantic_downsample_factor
        return features[:, ::step, :] if step > 1 else features

    def encode(self, wav: torch.Tensor) -> torch.Tensor:
        """(B, 1, N) mono audio at 24 kHz -> (B, num_quantizers, T) codes. (Upstream's encode
        also consumes random draws: see ``HubertModel.skip_layerdrop_draws``.)"""
        if wav.dim() != 3 or wav.shape[1] != 1:
            raise ValueError(f"the codec encodes mono (B, 1, N) audio, got {tuple(wav.shape)}")
        semantic = self.encoder_semantic(self.semantic_features(wav).transpose(1, 2))
        if self.acoustic_encoder.output_length(wav.shape[2]) != semantic.shape[2]:
            pad = self.cfg.hop_length // 2
            acoustic = self.acoustic_encoder(F.pad(wav, (pad, pad)))
        else:
            acoustic = self.acoustic_encoder(wav)
        emb = torch.cat([acoustic, semantic], dim=1)
        emb = self.fc(emb.transpose(1, 2)).transpose(1, 2)
        return self.quantizer.encode(emb).transpose(0, 1)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """(B, num_quantizers, T) codes -> (B, 1, hop * T) audio."""
        quantized = self.quantizer.decode(codes.transpose(0, 1))
        acoustic = self.fc2(quantized.transpose(1, 2)).transpose(1, 2)
        return self.acoustic_decoder(acoustic)
