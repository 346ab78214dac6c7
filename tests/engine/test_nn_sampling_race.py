"""engine.nn.layers.sampling: the legacy top-k/top-p filter and the exponential race."""

from __future__ import annotations

import torch

from audiocpp.engine.nn.layers.sampling import exponential_race, legacy_top_k_top_p


def test_legacy_filter_keeps_top_k_and_nucleus() -> None:
    scores = torch.tensor([[0.0, 3.0, 1.0, 2.0, -1.0]])
    assert torch.isinf(legacy_top_k_top_p(scores, 2, 1.0)).tolist() == [[True, False, True, False, True]]
    # softmax of (3, 2, 1, 0, -1): cumulative 0.636, 0.870, 0.956, ... -> top_p 0.9 keeps two (the
    # entry that crosses the threshold is dropped, unlike transformers' TopPLogitsWarper)
    assert torch.isinf(legacy_top_k_top_p(scores, 50, 0.9)).tolist() == [[True, False, True, False, True]]
    assert torch.isinf(legacy_top_k_top_p(scores, 50, 0.8)).sum().item() == 4
    # the best entry survives even when it alone exceeds top_p
    assert torch.isinf(legacy_top_k_top_p(scores, 50, 0.1)).sum().item() == 4


def test_exponential_race_draws_one_uniform_per_entry_and_samples_the_distribution() -> None:
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    scores = torch.log(torch.tensor([[0.1, 0.6, 0.3]]))
    exponential_race(scores, g1)
    torch.rand(1, 3, generator=g2)
    assert torch.equal(torch.rand(4, generator=g1), torch.rand(4, generator=g2))
    g = torch.Generator().manual_seed(0)
    draws = exponential_race(scores.expand(20000, 3), g)
    freq = torch.bincount(draws, minlength=3).float() / 20000
    assert torch.allclose(freq, torch.tensor([0.1, 0.6, 0.3]), atol=0.02)


def _sorted_filter(scores: torch.Tensor, top_k, top_p, vocab: int | None = None) -> torch.Tensor:
    """The filter through ``torch.sort`` as upstream writes it (``vocab``: softmax over the sorted
    scores padded with -inf to that width, as Audio8's compact semantic scores)."""
    n = scores.shape[-1]
    sorted_scores, sorted_indices = torch.sort(scores, descending=True, dim=-1)
    if vocab is not None:
        padded = torch.full((scores.shape[0], vocab), float("-inf"), dtype=scores.dtype)
        padded[:, :n] = sorted_scores
        cumulative = torch.cumsum(torch.softmax(padded, dim=-1)[:, :n], dim=-1)
    else:
        cumulative = torch.cumsum(torch.softmax(sorted_scores, dim=-1), dim=-1)
    positions = torch.arange(n)
    threshold = top_p if isinstance(top_p, torch.Tensor) else torch.tensor(top_p)
    remove_sorted = (cumulative > threshold.to(cumulative.dtype)) | (positions >= top_k)
    remove_sorted[..., 0] = False
    remove = torch.zeros_like(remove_sorted).scatter(1, sorted_indices, remove_sorted)
    return scores.masked_fill(remove, float("-inf"))


def test_filter_from_sorted_values_equals_the_torch_sort_filter() -> None:
    """The fast path (numpy's sort of the values) keeps exactly what torch.sort's filter keeps; rows
    where equal scores straddle the cut are left undecided and go through torch.sort, so the
    public filter equals upstream's on every row."""
    from audiocpp.engine.nn.layers.sampling import kept_by_rank

    gen = torch.Generator().manual_seed(0)
    undecided_rows = rows_seen = 0
    for trial in range(400):
        rows, n = (1 + trial % 4), (5, 64, 4096, 4097)[trial % 4]
        scores = torch.randn(rows, n, generator=gen) * (1 + trial % 7)
        if trial % 5 == 0:  # coarse values: many ties, some at the cut
            scores = (scores * 2).round() / 2
        if trial % 6 == 0:
            scores[:, ::3] = float("-inf")
        scores = scores.to(torch.bfloat16 if trial % 8 == 7 else torch.float32)
        if trial % 2:
            top_k = torch.randint(1, 80, (rows, 1), generator=gen)
            top_p = torch.rand(rows, 1, generator=gen)
        else:
            top_k, top_p = int(torch.randint(1, 80, (1,), generator=gen)), float(torch.rand(1, generator=gen))
        vocab = 151_000 if trial % 3 == 0 else None
        expected = _sorted_filter(scores, top_k, top_p, vocab)
        assert torch.equal(legacy_top_k_top_p(scores, top_k, top_p, vocab), expected), trial
        keep, undecided, _ = kept_by_rank(scores, top_k, top_p, vocab)
        decided = ~undecided
        assert torch.equal(scores.masked_fill(~keep, float("-inf"))[decided], expected[decided]), trial
        undecided_rows += int(undecided.sum())
        rows_seen += rows
    assert 0 < undecided_rows < rows_seen // 4  # ties at the cut: only coarse or bfloat16 values
    tied = torch.tensor([[1.0, 2.0, 2.0, 2.0, 0.5], [1.0, 2.0, 3.0, 4.0, 0.5]])
    assert kept_by_rank(tied, 2, 1.0)[1].tolist() == [True, False]
    assert torch.equal(legacy_top_k_top_p(tied, 2, 1.0), _sorted_filter(tied, 2, 1.0))
    nan = torch.tensor([[0.0, float("nan"), 1.0]])
    assert kept_by_rank(nan, 1, 1.0)[1].tolist() == [True]
    assert torch.equal(legacy_top_k_top_p(nan, 1, 1.0).isnan(), _sorted_filter(nan, 1, 1.0).isnan())
