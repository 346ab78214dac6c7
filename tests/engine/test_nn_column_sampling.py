"""engine.nn.layers.column_sampling: a draw and an argmax over a few columns of a vocabulary give what
the whole -inf-filled row gives, bit for bit, with one generator per row or one for the batch."""

from __future__ import annotations

import pytest
import torch

from audiocpp.engine.nn.kernels import rng
from audiocpp.engine.nn.layers.column_sampling import ALIGN, ScoreColumns
from audiocpp.engine.nn.layers.sampling import exponential_race

pytestmark = pytest.mark.skipif(rng.kernel() is None,
                                reason="no MT19937 kernel here: draws use the whole row")

#: Audio8 0.6B's: 4096 semantic ids after EOS; and a layout with EOS after them, away from them.
LAYOUTS = {"0.6B": (155776, torch.cat((torch.arange(151678, 155774), torch.tensor([151645])))),
           "eos after": (5000, torch.cat((torch.arange(300, 700), torch.tensor([4321]))))}


def _scores(rows: int, n: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    source = torch.Generator().manual_seed(seed)
    scores = (torch.randn(rows, n, generator=source) * 4).to(dtype)
    scores[torch.rand(rows, n, generator=source) < 0.9] = float("-inf")  # what top-k / top-p leave
    scores[:, seed % n] = 0.5
    return scores


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_race_is_the_whole_rows_race(layout: str, dtype: torch.dtype) -> None:
    vocab, columns = LAYOUTS[layout]
    space = ScoreColumns(columns, vocab)
    assert space.lo % ALIGN == 0 and space.hi <= vocab and space.exact(dtype)
    for seed in range(6):
        scores = _scores(4, columns.numel(), dtype, seed)
        mine = [torch.Generator().manual_seed(seed * 4 + r) for r in range(4)]
        theirs = [torch.Generator().manual_seed(seed * 4 + r) for r in range(4)]
        assert torch.equal(space.race(scores, mine), exponential_race(space.whole(scores), theirs))
        assert all(torch.equal(a.get_state(), b.get_state()) for a, b in zip(mine, theirs))
        one, other = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
        assert torch.equal(space.race(scores, one), exponential_race(space.whole(scores), other))
        assert torch.equal(one.get_state(), other.get_state())


def test_argmax_is_the_whole_rows_argmax() -> None:
    vocab, columns = LAYOUTS["0.6B"]
    space = ScoreColumns(columns, vocab)
    scores = _scores(3, columns.numel(), torch.float32, 1)
    scores[1] = float("-inf")  # nothing finite: the whole row's argmax is index 0
    scores[2, 7] = scores[2, 9] = 50.0  # a tie: the lower vocabulary id wins
    scores[0, 4096] = 60.0  # EOS, before the semantic ids
    assert torch.equal(space.argmax(scores), space.whole(scores).argmax(-1))
    assert space.argmax(scores).tolist() == [151645, 0, 151678 + 7]


def test_a_race_whose_maximum_is_zero_gives_index_zero() -> None:
    space = ScoreColumns(torch.tensor([5, 9]), 64)
    values = torch.tensor([[0.0, 0.0], [0.0, 0.25]])
    assert space._first_max(values, zero=True).tolist() == [0, 9]


def test_columns_must_be_distinct_ids() -> None:
    assert ScoreColumns.of(torch.tensor([3, 3]), 10) is None
    assert ScoreColumns.of(torch.tensor([3, 12]), 10) is None
    assert ScoreColumns.of(torch.tensor([3, 7]), 10) is not None


def test_falls_back_where_it_cannot_draw() -> None:
    space = ScoreColumns(torch.tensor([1, 2]), 8)
    assert space.race(torch.zeros(1, 2, dtype=torch.float64), None) is None
