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
        """Alone: upstream's forward. Together: one padded durations step (PL-BERT with the padded keys
        masked, packed LSTMs), then each row's acoustics and decoder on its own frames."""
        if len(ops) == 1:
            return [ops[0].run()]
        net = ops[0].net
        device = next(net.parameters()).device
        width = max(len(op.ids) for op in ops) + 2
        ids = torch.zeros((len(ops), width), dtype=torch.long, device=device)
        for i, op in enumerate(ops):
            ids[i, 1:len(op.ids) + 1] = torch.tensor(op.ids, dtype=torch.long)
        lengths = torch.tensor([len(op.ids) + 2 for op in ops], dtype=torch.long)
        ref_s = torch.cat([op.ref_s.reshape(1, -1) for op in ops]).to(device)
        out = []
        with torch.inference_mode():
            d, pred_dur = net.durations(ids, lengths, ref_s, [op.speed for op in ops])
            for i, op in enumerate(ops):
                n = int(lengths[i])
                asr, f0, nn = net.acoustics(ids[i:i + 1, :n], d[i:i + 1, :n], pred_dur[i, :n], ref_s[i:i + 1])
                audio = net.decode(asr, f0, nn, ref_s[i:i + 1], op.generator)[0]
                out.append((audio.float().cpu(), pred_dur[i, :n].cpu()))
        return out

    def run(self) -> tuple[Any, Any]:
        device = next(self.net.parameters()).device
        with torch.inference_mode():
            ids = torch.tensor([[0, *self.ids, 0]], dtype=torch.long, device=device)
            audio, pred_dur = self.net.forward_with_tokens(ids, self.ref_s.to(device), self.speed,
                                                           self.generator)
        return audio.float().cpu(), pred_dur.cpu()
