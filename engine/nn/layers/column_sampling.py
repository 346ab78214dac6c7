"""Draws and argmaxes over a vocabulary of which only some columns can be finite, exact and cheap.

Audio8's 0.6B scores only the semantic ids and EOS (4,097 of its 155,776 vocabulary entries) and
then, as upstream does, draws over the whole vocabulary: ``argmax(softmax(s) / -log u)`` with one
uniform per entry, every other entry at ``-inf``. :class:`ScoreColumns` computes the same draw
without the whole row:

- the softmax runs over a window of the row from the first to the last column, cut at multiples of
  64 entries: torch's vectorized sum gives each entry the lane it has in the whole row, and the
  entries outside the window add exact zeros, so every probability is the whole row's bit for bit;
- the uniforms come from :func:`engine.nn.kernels.rng.uniform_at`: the columns' values of the whole draw,
  the generator left where the whole draw leaves it;
- the argmax runs over the columns in vocabulary order (the first maximum wins, as in the whole
  row; a row whose maximum is 0 gives index 0, as a row of zeros does).

Before its first use for a dtype, the window and the whole row are compared on random scores;
where they differ (another torch) or the random kernel is not there, callers keep the whole row.
"""

from __future__ import annotations

import torch

from ..kernels import rng
from .sampling import ALIGN, exponential_race


class ScoreColumns:
    """The ``columns`` (vocabulary ids) that hold a ``[B, vocab]`` row's only finite scores, given
    compact: ``scores[:, j]`` is column ``columns[j]``'s."""

    def __init__(self, columns: torch.Tensor, vocab: int) -> None:
        columns = columns.to(torch.long).cpu()
        self.order = torch.argsort(columns)
        self.sorted = columns[self.order].contiguous()
        if self.sorted.numel() == 0 or int(self.sorted[0]) < 0 or int(self.sorted[-1]) >= vocab \
                or bool((self.sorted[1:] == self.sorted[:-1]).any()):
            raise ValueError("columns must be distinct vocabulary ids")
        self.vocab = int(vocab)
        self.lo = int(self.sorted[0]) // ALIGN * ALIGN
        self.hi = min(self.vocab, -(-(int(self.sorted[-1]) + 1) // ALIGN) * ALIGN)
        self.slots = self.sorted - self.lo
        self._exact: dict[torch.dtype, bool] = {}

    @classmethod
    def of(cls, columns: torch.Tensor, vocab: int) -> ScoreColumns | None:
        """The space of ``columns``, or None where they are not distinct vocabulary ids."""
        try:
            return cls(columns, vocab)
        except ValueError:
            return None

    def whole(self, scores: torch.Tensor) -> torch.Tensor:
        """The ``[B, vocab]`` row: ``-inf`` outside the columns."""
        out = scores.new_full((scores.shape[0], self.vocab), float("-inf"))
        out[:, self.sorted.to(scores.device)] = scores[:, self.order.to(scores.device)]
        return out

    def _window(self, scores: torch.Tensor) -> torch.Tensor:
        out = scores.new_full((scores.shape[0], self.hi - self.lo), float("-inf"))
        out[:, self.slots] = scores[:, self.order]
        return out

    # -- the draw -------------------------------------------------------------------------------
    def race(self, scores: torch.Tensor, generator: torch.Generator | None | list[torch.Generator | None]
             ) -> torch.Tensor | None:
        """``exponential_race(self.whole(scores), generator)``, bit for bit; None (nothing drawn)
        where it cannot be done that way here."""
        generators = generator if isinstance(generator, list) else [generator]
        if scores.device.type != "cpu" or not all(rng.can_draw(g, scores.dtype) for g in generators) \
                or not self.exact(scores.dtype):
            return None
        return self._race(scores, generator)

    def _race(self, scores: torch.Tensor, generator: torch.Generator | None | list[torch.Generator | None]
              ) -> torch.Tensor:
        rows, dtype = scores.shape[0], scores.dtype
        probabilities = torch.softmax(self._window(scores), dim=-1)[:, self.slots]
        if isinstance(generator, list):
            random = torch.stack([rng.uniform_at(g, self.vocab, self.sorted, dtype) for g in generator])
        else:  # one generator for the batch: row b's uniforms follow row b - 1's
            positions = (torch.arange(rows)[:, None] * self.vocab + self.sorted).flatten()
            random = rng.uniform_at(generator, rows * self.vocab, positions, dtype).view(rows, -1)
        return self._first_max(probabilities / -torch.log(random), zero=True)

    def argmax(self, scores: torch.Tensor) -> torch.Tensor:
        """``self.whole(scores).argmax(-1)`` (a row of ``-inf`` gives 0, as the whole row does)."""
        return self._first_max(scores[:, self.order.to(scores.device)], zero=False)

    def _first_max(self, values: torch.Tensor, *, zero: bool) -> torch.Tensor:
        """The vocabulary id of each row's first maximum over the columns; 0 where the whole row's
        maximum is an entry outside them (0 in a race, -inf in an argmax)."""
        index = values.argmax(dim=-1)
        best = values.gather(1, index[:, None])[:, 0]
        ids = self.sorted.to(values.device)[index]
        outside = best == 0 if zero else best == float("-inf")
        return torch.where(outside, torch.zeros_like(ids), ids)

    # -- the check ------------------------------------------------------------------------------
    def exact(self, dtype: torch.dtype) -> bool:
        """Whether the window's draws are the whole row's here, for scores of ``dtype`` (checked
        once per dtype on random scores)."""
        verdict = self._exact.get(dtype)
        if verdict is None:
            verdict = self._exact[dtype] = self._agrees(dtype)
        return verdict

    def _agrees(self, dtype: torch.dtype) -> bool:
        n = self.sorted.numel()
        for seed, rows in ((0, 1), (1, 3), (2, 8)):
            source = torch.Generator().manual_seed(seed)
            scores = (torch.randn(rows, n, generator=source) * (1 + 3 * seed)).to(dtype)
            scores[torch.rand(rows, n, generator=source) < 0.5] = float("-inf")
            scores[:, seed % n] = 1.0
            for per_row in (False, True):
                mine = [torch.Generator().manual_seed(seed * 10 + r) for r in range(rows)]
                theirs = [torch.Generator().manual_seed(seed * 10 + r) for r in range(rows)]
                got = self._race(scores, mine if per_row else mine[0])
                want = exponential_race(self.whole(scores), theirs if per_row else theirs[0])
                states = zip(mine if per_row else mine[:1], theirs if per_row else theirs[:1])
                if not torch.equal(got, want) or any(not torch.equal(a.get_state(), b.get_state())
                                                     for a, b in states):
                    return False
            window = torch.softmax(self._window(scores), dim=-1)
            if not torch.equal(window, torch.softmax(self.whole(scores), dim=-1)[:, self.lo:self.hi]):
                return False
            if not torch.equal(self.argmax(scores), self.whole(scores).argmax(-1)):
                return False
        return True
