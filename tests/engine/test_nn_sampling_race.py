"""engine.nn.sampling: the legacy top-k/top-p filter and the exponential race."""

from __future__ import annotations

import torch

from audiocpp.engine.nn.sampling import exponential_race, legacy_top_k_top_p


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
