"""Running Kokoro's network for a row program: one :class:`ForwardOp` per chunk.

A chunk is one forward of ``KModel`` (durations, acoustics, decoder). Run alone (a group of one), the op
is upstream's ``forward_with_tokens`` on the chunk's ids; rows of a batch run their durations step as one
padded batch (every row masked to its own length) and their decoders one by one (the decoder's instance
norms take statistics over the whole time axis, so a row cannot share a padded decoder call and keep its
numbers).
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
        return [op.run() for op in ops]

    def run(self) -> tuple[Any, Any]:
        device = next(self.net.parameters()).device
        with torch.inference_mode():
            ids = torch.tensor([[0, *self.ids, 0]], dtype=torch.long, device=device)
            audio, pred_dur = self.net.forward_with_tokens(ids, self.ref_s.to(device), self.speed,
                                                           self.generator)
        return audio.float().cpu(), pred_dur.cpu()
