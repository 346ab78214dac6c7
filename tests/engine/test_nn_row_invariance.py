"""engine.nn.linear.row_invariance: the probe compares the rows it is asked about, in two real products,
bit for bit; it is cached per question; the shapes it probes are torch's own GEMMs only."""

from __future__ import annotations

import torch

from audiocpp.engine.nn.linear import row_invariance as ri
from audiocpp.engine.nn.linear.q8_0_linear import kernel as q8_kernel


def test_rows_of_the_same_product_are_the_same() -> None:
    assert ri.same_rows(48, 64, torch.float32, 40, ((40, 0, 0, 40),))  # a product against itself


def test_a_product_that_computes_rows_otherwise_is_caught(monkeypatch) -> None:
    real = torch.nn.functional.linear

    def by_row_count(x, w):  # a GEMM whose rows depend on the product's size, as MKL's small path
        y = real(x, w)
        return y + 1e-6 * y.abs() if x.shape[0] > 50 else y

    monkeypatch.setattr(ri.F, "linear", by_row_count)
    ri.same_rows.cache_clear()
    try:
        assert not ri.same_rows(16, 32, torch.float32, 60, ((30, 0, 10, 30),))
        assert ri.same_rows(16, 32, torch.float32, 40, ((30, 0, 10, 30),))
    finally:
        ri.same_rows.cache_clear()


def test_only_plain_linears_are_probed() -> None:
    net = torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.ReLU(), torch.nn.Linear(32, 16),
                              torch.nn.Linear(16, 8).to(torch.bfloat16))
    assert set(ri.torch_gemm_shapes(net)) == {(8, 16, torch.bfloat16), (16, 32, torch.float32)}
    if q8_kernel() is not None:
        from audiocpp.engine.nn.linear.q8_0_linear import Q8_0Linear

        layer = Q8_0Linear.from_values(torch.zeros(16, 32, dtype=torch.int8), torch.ones(16, 1))
        assert ri.torch_gemm_shapes(torch.nn.Sequential(layer)) == ()
    assert ri.all_same_rows((), 10, [(5, 0, 0, 5)])
