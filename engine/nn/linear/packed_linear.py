"""Linear layers with oneDNN-packed weights for CPU inference.

``engine.nn.linear.choice.fast_linears(module, packed=True)`` replaces the ``nn.Linear`` layers below
``module`` by a :class:`PackedLinear` whose weight is reordered once into oneDNN's blocked layout
(``torch.ops.mkldnn._reorder_linear_weight``) and applied with ``_linear_pointwise``. For the
small row counts of autoregressive decoding (1 to a few dozen rows) this is much faster than
the default CPU GEMM: on an AVX-512 machine about 2.4x at one row and 1.4x at 22 rows in
bfloat16, 1.2x to 2.5x in float32.

Numbers: in bfloat16 the result equals ``F.linear`` bit for bit on the machines we measured;
in float32 oneDNN sums in another order than the default GEMM, a relative difference of about
1e-6 per product (thread-count changes alone give about 1e-7). Families expose it as an option
and document the drift. Unsupported builds or devices leave the module unchanged.
"""

from __future__ import annotations

from functools import cache

import torch
from torch import nn


@cache
def packing_available(dtype: torch.dtype) -> bool:
    """Whether this torch build can pack and run a small linear of ``dtype`` on the CPU."""
    try:
        if not torch.backends.mkldnn.is_available():
            return False
        w = torch.randn(8, 16).to(dtype)
        packed = torch.ops.mkldnn._reorder_linear_weight(w)
        y = torch.ops.mkldnn._linear_pointwise(torch.randn(2, 16).to(dtype), packed, None, "none", [], "")
        return tuple(y.shape) == (2, 8)
    except (RuntimeError, AttributeError, NotImplementedError):
        return False


class PackedLinear(nn.Module):
    """``y = x W^T + b`` with ``W`` in oneDNN's packed layout (inference only)."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        weight = linear.weight.detach()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.dtype = weight.dtype
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.contiguous())
        self.bias = None if linear.bias is None else linear.bias.detach().clone()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, packed=onednn"
