"""Tensor -> stored bytes for one ggml type (bit-exact with ggml for BF16, Q8_0 and Q4_0)."""

from __future__ import annotations

import numpy as np
import torch
from gguf import GGMLQuantizationType
from gguf import quants as gguf_quants

T = GGMLQuantizationType

_INT_NUMPY = {T.I8: np.int8, T.I16: np.int16, T.I32: np.int32, T.I64: np.int64}
_INT_RANGE = {T.I8: (-(2**7), 2**7 - 1), T.I16: (-(2**15), 2**15 - 1), T.I32: (-(2**31), 2**31 - 1),
              T.I64: (-(2**63), 2**63 - 1)}


def physical_ne(shape: tuple[int, ...]) -> tuple[int, ...]:
    """ggml dims (fastest first) for a PyTorch shape: reversed, a scalar as [1], and ranks
    above 4 (GGML_MAX_DIMS) folded into the slowest dim. The exact shape is kept in the
    package's ``audiocpp.tensor_shapes``."""
    if not shape:
        return (1,)
    ne = tuple(reversed(shape))
    if len(ne) > 4:
        slow = 1
        for d in ne[3:]:
            slow *= d
        ne = (*ne[:3], slow)
    return ne


def encode_tensor(tensor: torch.Tensor, ggml_type: GGMLQuantizationType, name: str = "") -> np.ndarray:
    """The bytes of ``tensor`` stored as ``ggml_type`` (a numpy array in C order)."""
    t = tensor.detach()
    if ggml_type in _INT_NUMPY:
        if t.is_floating_point() or t.is_complex():
            raise ValueError(f"tensor {name!r}: integer storage requested for a {t.dtype} tensor")
        arr = t.contiguous().numpy()
        lo, hi = _INT_RANGE[ggml_type]
        if arr.size and arr.dtype != np.bool_ and (int(arr.min()) < lo or int(arr.max()) > hi):
            raise ValueError(f"tensor {name!r}: values do not fit {ggml_type.name}")
        return arr.astype(_INT_NUMPY[ggml_type]).reshape(-1)
    if not t.is_floating_point():
        raise ValueError(f"tensor {name!r}: float storage {ggml_type.name} requested for a {t.dtype} tensor")
    if ggml_type == T.F32:
        return t.to(torch.float32).contiguous().numpy().reshape(-1)
    if ggml_type == T.F16:
        return t.to(torch.float16).contiguous().numpy().reshape(-1)
    values = t.to(torch.float32).contiguous().numpy()
    if ggml_type == T.BF16:
        return gguf_quants.quantize(values.reshape(-1), T.BF16)
    # Block types: rows are the last PyTorch dim.
    return gguf_quants.quantize(values.reshape(-1, values.shape[-1]), ggml_type)
