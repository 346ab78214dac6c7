"""Kokoro-82M's network (upstream ``kokoro.model.KModel``), in three steps a request runs in order:

1. :meth:`KModel.durations`: PL-BERT over the phoneme ids, the style-conditioned duration encoder
   and head -> frames per token (rounded, at least 1, divided by the speed first);
2. :meth:`KModel.acoustics`: the tokens' features repeated by their durations (the alignment),
   the F0 and energy curves, the acoustic text encoder -> the decoder's inputs;
3. :meth:`KModel.decode`: the iSTFTNet decoder -> 24 kHz audio.

``ref_s`` is a voice's style row ``[B, 2 * style_dim]``: its second half drives the prosody
predictor, its first half the decoder. Submodule names are upstream's (``bert``, ``bert_encoder``,
``predictor``, ``text_encoder``, ``decoder``), so hexgrad's checkpoint dicts load 1:1.
"""

from __future__ import annotations

import torch
from torch import nn

from ..config import KokoroConfig
from .albert import CustomAlbert
from .istftnet import Decoder
from .prosody import ProsodyPredictor, TextEncoder, full_lstm


def padding_mask(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """True at padded positions ``[B, width]`` (upstream's ``text_mask``)."""
    positions = torch.arange(width, device=lengths.device).unsqueeze(0).expand(lengths.shape[0], -1)
    return torch.gt(positions.type_as(lengths) + 1, lengths.unsqueeze(1))


class KModel(nn.Module):
    def __init__(self, cfg: KokoroConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.bert = CustomAlbert(cfg.plbert)
        self.bert_encoder = nn.Linear(cfg.plbert.hidden_size, cfg.hidden_dim)
        self.predictor = ProsodyPredictor(style_dim=cfg.style_dim, d_hid=cfg.hidden_dim, nlayers=cfg.n_layer,
                                          max_dur=cfg.max_dur)
        self.text_encoder = TextEncoder(channels=cfg.hidden_dim, kernel_size=cfg.text_encoder_kernel_size,
                                        depth=cfg.n_layer, n_symbols=cfg.n_token)
        self.decoder = Decoder(dim_in=cfg.hidden_dim, style_dim=cfg.style_dim, cfg=cfg.istftnet)

    def durations(self, input_ids: torch.Tensor, ref_s: torch.Tensor,
                  speed: float) -> tuple[torch.Tensor, torch.Tensor]:
        """One row ``input_ids [1, T]`` -> the duration encoder's output ``d [1, T, hidden + style]`` and
        the frames per token ``[T]`` (long)."""
        lengths = torch.full((1,), input_ids.shape[1], dtype=torch.long)
        bert_dur = self.bert(input_ids, lengths)
        d_en = self.bert_encoder(bert_dur).transpose(-1, -2)
        s = ref_s[:, self.cfg.style_dim:]
        d = self.predictor.text_encoder(d_en, s, lengths, padding_mask(lengths, input_ids.shape[1]))
        duration = self.predictor.duration_proj(full_lstm(self.predictor.lstm, d))
        duration = torch.sigmoid(duration).sum(dim=-1)[0] / float(speed)  # a Python number, as upstream
        return d, torch.round(duration).clamp(min=1).long()

    def acoustics(self, input_ids: torch.Tensor, d: torch.Tensor, pred_dur: torch.Tensor,
                  ref_s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One row (``input_ids [1, T]``, ``d [1, T, C]``, ``pred_dur [T]``) -> the decoder's inputs:
        ``asr [1, hidden, F]``, ``F0 [1, 2F]``, ``N [1, 2F]`` for ``F = sum(pred_dur)`` frames.

        Upstream multiplies by a one-hot alignment matrix; each output frame is one input frame
        times 1 plus zeros, so repeating the frames (what is done here) gives the same bits."""
        frames = torch.repeat_interleave(torch.arange(input_ids.shape[1], device=input_ids.device), pred_dur)
        en = d.transpose(-1, -2).index_select(-1, frames)
        s = ref_s[:, self.cfg.style_dim:]
        f0, n = self.predictor.F0Ntrain(en, s)
        lengths = torch.full((1,), input_ids.shape[1], dtype=torch.long)
        t_en = self.text_encoder(input_ids, lengths, padding_mask(lengths, input_ids.shape[1]))
        return t_en.index_select(-1, frames), f0, n

    def decode(self, asr: torch.Tensor, f0: torch.Tensor, n: torch.Tensor, ref_s: torch.Tensor,
               generator: torch.Generator | None) -> torch.Tensor:
        """The decoder's audio ``[B, samples]``; ``generator`` None: the deterministic source."""
        return self.decoder(asr, f0, n, ref_s[:, :self.cfg.style_dim], generator).squeeze(1)

    @torch.no_grad()
    def forward_with_tokens(self, input_ids: torch.Tensor, ref_s: torch.Tensor, speed: float = 1.0,
                            generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Upstream's ``forward_with_tokens`` for one row ``[1, T]`` (ids already wrapped in 0s):
        ``(audio [samples], pred_dur [T])``."""
        d, pred_dur = self.durations(input_ids, ref_s, speed)
        asr, f0, n = self.acoustics(input_ids, d, pred_dur, ref_s)
        return self.decode(asr, f0, n, ref_s, generator)[0], pred_dur
