"""Kokoro's text side (upstream ``kokoro/modules.py``, from StyleTTS2): the acoustic ``TextEncoder``
(CNN + BiLSTM), and the ``ProsodyPredictor`` (style-conditioned duration encoder, duration head, and
the F0 / energy (``N``) curves). Names and arithmetic are upstream's; LSTMs run on packed sequences
where upstream packs them, so padded rows of a batch see exactly their own frames.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .istftnet import AdainResBlk1d


def packed_lstm(lstm: nn.LSTM, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Upstream's ``pack_padded_sequence`` -> LSTM -> ``pad_packed_sequence`` (batch first):
    ``[B, max(lengths), C]``."""
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    out, _ = lstm(packed)
    out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
    return out


def full_lstm(lstm: nn.LSTM, x: torch.Tensor) -> torch.Tensor:
    """An LSTM over every frame of ``x`` ``[B, T, C]`` (upstream calls these unpacked)."""
    return lstm(x)[0]


class LayerNorm(nn.Module):
    """Layer norm over channels of ``[B, C, T]`` (StyleTTS2's ``gamma`` / ``beta`` names)."""

    def __init__(self, channels: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.channels, self.eps = channels, eps
        self.gamma = nn.Parameter(torch.ones(channels))
        self.beta = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.transpose(1, -1)
        x = F.layer_norm(x, (self.channels,), self.gamma, self.beta, self.eps)
        return x.transpose(1, -1)


class TextEncoder(nn.Module):
    def __init__(self, channels: int, kernel_size: int, depth: int, n_symbols: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(n_symbols, channels)
        padding = (kernel_size - 1) // 2
        self.cnn = nn.ModuleList(
            nn.Sequential(nn.Conv1d(channels, channels, kernel_size=kernel_size, padding=padding),
                          LayerNorm(channels), nn.LeakyReLU(0.2))
            for _ in range(depth))
        self.lstm = nn.LSTM(channels, channels // 2, 1, batch_first=True, bidirectional=True)

    def forward(self, x: torch.Tensor, input_lengths: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        x = self.embedding(x).transpose(1, 2)
        m = m.unsqueeze(1)
        x.masked_fill_(m, 0.0)
        for c in self.cnn:
            x = c(x)
            x.masked_fill_(m, 0.0)
        x = packed_lstm(self.lstm, x.transpose(1, 2), input_lengths).transpose(-1, -2)
        x_pad = torch.zeros([x.shape[0], x.shape[1], m.shape[-1]], device=x.device)
        x_pad[:, :, :x.shape[-1]] = x
        x_pad.masked_fill_(m, 0.0)
        return x_pad


class AdaLayerNorm(nn.Module):
    def __init__(self, style_dim: int, channels: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.channels, self.eps = channels, eps
        self.fc = nn.Linear(style_dim, channels * 2)

    def forward(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        x = x.transpose(-1, -2).transpose(1, -1)
        h = self.fc(s)
        h = h.view(h.size(0), h.size(1), 1)
        gamma, beta = torch.chunk(h, chunks=2, dim=1)
        gamma, beta = gamma.transpose(1, -1), beta.transpose(1, -1)
        x = F.layer_norm(x, (self.channels,), eps=self.eps)
        x = (1 + gamma) * x + beta
        return x.transpose(1, -1).transpose(-1, -2)


class DurationEncoder(nn.Module):
    """Alternating BiLSTMs and style-conditioned layer norms, the style concatenated to every frame."""

    def __init__(self, sty_dim: int, d_model: int, nlayers: int) -> None:
        super().__init__()
        self.lstms = nn.ModuleList()
        for _ in range(nlayers):
            self.lstms.append(nn.LSTM(d_model + sty_dim, d_model // 2, num_layers=1, batch_first=True,
                                      bidirectional=True))
            self.lstms.append(AdaLayerNorm(sty_dim, d_model))
        self.d_model, self.sty_dim = d_model, sty_dim

    def forward(self, x: torch.Tensor, style: torch.Tensor, text_lengths: torch.Tensor,
                m: torch.Tensor) -> torch.Tensor:
        x = x.permute(2, 0, 1)
        s = style.expand(x.shape[0], x.shape[1], -1)
        x = torch.cat([x, s], dim=-1)
        x.masked_fill_(m.unsqueeze(-1).transpose(0, 1), 0.0)
        x = x.transpose(0, 1).transpose(-1, -2)
        for block in self.lstms:
            if isinstance(block, AdaLayerNorm):
                x = block(x.transpose(-1, -2), style).transpose(-1, -2)
                x = torch.cat([x, s.permute(1, 2, 0)], dim=1)
                x.masked_fill_(m.unsqueeze(-1).transpose(-1, -2), 0.0)
            else:
                x = packed_lstm(block, x.transpose(-1, -2), text_lengths).transpose(-1, -2)
                x_pad = torch.zeros([x.shape[0], x.shape[1], m.shape[-1]], device=x.device)
                x_pad[:, :, :x.shape[-1]] = x
                x = x_pad
        return x.transpose(-1, -2)


class LinearNorm(nn.Module):
    def __init__(self, in_dim: int, out_dim: int, bias: bool = True) -> None:
        super().__init__()
        self.linear_layer = nn.Linear(in_dim, out_dim, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_layer(x)


class ProsodyPredictor(nn.Module):
    def __init__(self, style_dim: int, d_hid: int, nlayers: int, max_dur: int = 50) -> None:
        super().__init__()
        self.text_encoder = DurationEncoder(sty_dim=style_dim, d_model=d_hid, nlayers=nlayers)
        self.lstm = nn.LSTM(d_hid + style_dim, d_hid // 2, 1, batch_first=True, bidirectional=True)
        self.duration_proj = LinearNorm(d_hid, max_dur)
        self.shared = nn.LSTM(d_hid + style_dim, d_hid // 2, 1, batch_first=True, bidirectional=True)
        self.F0 = nn.ModuleList([
            AdainResBlk1d(d_hid, d_hid, style_dim),
            AdainResBlk1d(d_hid, d_hid // 2, style_dim, upsample=True),
            AdainResBlk1d(d_hid // 2, d_hid // 2, style_dim),
        ])
        self.N = nn.ModuleList([
            AdainResBlk1d(d_hid, d_hid, style_dim),
            AdainResBlk1d(d_hid, d_hid // 2, style_dim, upsample=True),
            AdainResBlk1d(d_hid // 2, d_hid // 2, style_dim),
        ])
        self.F0_proj = nn.Conv1d(d_hid // 2, 1, 1, 1, 0)
        self.N_proj = nn.Conv1d(d_hid // 2, 1, 1, 1, 0)

    def F0Ntrain(self, x: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = full_lstm(self.shared, x.transpose(-1, -2))
        f0 = x.transpose(-1, -2)
        for block in self.F0:
            f0 = block(f0, s)
        f0 = self.F0_proj(f0)
        n = x.transpose(-1, -2)
        for block in self.N:
            n = block(n, s)
        n = self.N_proj(n)
        return f0.squeeze(1), n.squeeze(1)
