"""Running Kokoro's network for a row program: one :class:`ForwardOp` per chunk.

A chunk is one forward of ``KModel`` (durations, acoustics, decoder): upstream's ``forward_with_tokens``
on the chunk's ids. Rows of a batch take turns, one forward each, so a row gives its lone audio bit for bit
whatever it is batched with. A shared, padded durations step (PL-BERT, LSTMs) would save under 7 % of a
row's time but move its ``d`` by ~1e-5, which the F0 predictor and the harmonic source turn into a phase
drift of the waveform (measured on the real int8 package: spectral cosine 0.9986 from 0.25 s on); the
decoder cannot share a call anyway (its instance norms take statistics over a row's whole time axis).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from audiocpp.engine.batching import Op

from .model import KModel


@dataclass
class ForwardOp(Op):
    net: KModel
    ids: list[int]
    ref_s: torch.Tensor  # [1, 2 * style_dim]
    speed: float
    generator: torch.Generator | None  # None: the deterministic source

    def group_key(self) -> Hashable:
        return (id(self.net),)

    @classmethod
    def run_group(cls, ops: Sequence[ForwardOp]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Each row's own forward, in turn (module docstring: why rows share no call)."""
        return [op.run() for op in ops]

    def run(self) -> tuple[Any, Any]:
        device = next(self.net.parameters()).device
        with torch.inference_mode():
            ids = torch.tensor([[0, *self.ids, 0]], dtype=torch.long, device=device)
            audio, pred_dur = self.net.forward_with_tokens(ids, self.ref_s.to(device), self.speed,
                                                           self.generator)
        return audio.float().cpu(), pred_dur.cpu()
