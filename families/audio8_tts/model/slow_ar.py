"""The slow (semantic) AR interface: what the DualAR loop asks of a backbone.

Two backbones implement it: the Qwen-style transformer of the 0.6B model (``qwen.py``) and
the Falcon-H1 hybrid of the 0.1B model (``falcon_h1.py``). ``generate.py`` drives either one
without knowing which:

1. ``setup(batch, max_length)`` allocates the static decode state (KV caches; Mamba conv and
   SSM states) for one generation of at most ``max_length`` positions.
2. ``embed(rows)`` turns input rows ``[B, 1 + num_codebooks, T]`` (row 0: text / semantic
   ids, rows 1..: codebook codes, zero outside semantic positions) into ``[B, T, dim]``,
   with the backbone's own scaling of the sum.
3. ``prefill(embeds, positions, mask)`` runs the whole left-padded prompt:
   ``positions`` ``[B, T]`` are the rotary positions (``cumsum(mask) - 1`` clamped at 0),
   ``mask`` ``[B, T]`` (long, 1 = real token) is the key padding mask. It fills the state at
   physical slots ``0..T-1`` and returns the :class:`SlowHidden` of the last position.
4. ``step(embeds, positions, valid)`` runs one column ``[B, 1, dim]`` at the next physical
   slot (the backbone owns its write position: ``T`` after the prefill, then one more per
   step); ``positions`` ``[B, 1]`` is its rotary position and ``valid`` ``[B, 1]`` (long, 1 =
   real token) its padding-mask bit (upstream appends ``active_before``: 0 once a row has
   finished). Static shapes: nothing grows from step to step.
5. Rows of a continuous batch each hold their own state: ``new_state(max_length)`` makes one
   (one row), ``prefill(..., state=)`` / ``step(..., state=)`` use it instead of the backbone's
   own, and ``step_rows(embeds, positions, states)`` steps ``B`` rows, row ``b`` on
   ``states[b]``, as one batch (projections and MLPs over all rows; each row's attention and
   recurrent state as it runs alone).
6. ``semantic_logits(hidden)`` scores the next semantic token. :attr:`head` says how to
   read them: ``"full_vocab"`` (tied logits over the whole vocabulary: the loop keeps the
   semantic range plus EOS, as ``ArkttsSemanticLogitsProcessor``) or ``"compact"``
   (``num_semantic + 1`` scores: index ``i`` is ``semantic_begin_id + i``, the last is EOS;
   the loop maps the ids). Full-vocab heads also give ``semantic_logits(hidden,
   compact=True)``: the same ``num_semantic + 1`` scores without computing the rest of the
   vocabulary (numerically equal to the full-vocab rows).

All tensors stay on the backbone's device and dtype; nothing here draws random numbers.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

import torch
from torch import nn

HeadKind = Literal["full_vocab", "compact"]


class SlowHidden(NamedTuple):
    """The slow AR's output at the last position, ``[B, 1, dim]`` each.

    ``logits_input`` feeds :meth:`SlowAR.semantic_logits` (the final-normed hidden state);
    ``fast_input`` feeds the fast AR (the same tensor unless the config's
    ``norm_fastlayer_input`` is false, then the hidden state before the final norm).
    """

    logits_input: torch.Tensor
    fast_input: torch.Tensor


class SlowAR(nn.Module):
    """Base class of slow AR backbones (see the module docstring for the contract)."""

    head: HeadKind = "full_vocab"
    dim: int = 0

    def setup(self, batch_size: int, max_length: int) -> None:
        raise NotImplementedError

    def new_state(self, max_length: int) -> Any:
        raise NotImplementedError

    def embed(self, rows: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def prefill(self, embeds: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor,
                state: Any = None) -> SlowHidden:
        raise NotImplementedError

    def step(self, embeds: torch.Tensor, positions: torch.Tensor, valid: torch.Tensor,
             state: Any = None) -> SlowHidden:
        raise NotImplementedError

    def step_rows(self, embeds: torch.Tensor, positions: torch.Tensor, states: list[Any]) -> SlowHidden:
        raise NotImplementedError

    def semantic_logits(self, hidden: torch.Tensor, *, compact: bool = False) -> torch.Tensor:
        raise NotImplementedError

    def release(self) -> None:
        """Free the decode state allocated by :meth:`setup` (optional)."""
