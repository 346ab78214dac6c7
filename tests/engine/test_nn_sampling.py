"""engine.nn.layers.sampling: the padded softmax of the legacy filter stops at a lane-aligned width and
keeps the whole padded row's bits."""

from __future__ import annotations

import pytest
import torch

from audiocpp.engine.nn.layers.sampling import padded_softmax


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows,n,width", [(1, 4097, 155776), (8, 4097, 155776), (2, 65, 200), (3, 64, 64),
                                          (1, 5, 7)])
def test_padded_softmax_is_the_whole_padded_rows(dtype: torch.dtype, rows: int, n: int, width: int) -> None:
    source = torch.Generator().manual_seed(n + rows)
    x = (torch.randn(rows, n, generator=source) * 6).to(dtype)
    x[torch.rand(rows, n, generator=source) < 0.4] = float("-inf")
    x[:, -1] = 0.0
    whole = torch.full((rows, width), float("-inf"), dtype=dtype)
    whole[:, :n] = x
    assert torch.equal(padded_softmax(x, width), torch.softmax(whole, dim=-1)[:, :n])
