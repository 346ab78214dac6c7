"""Weights as an ONNX graph stores them, dequantized as onnxruntime dequantizes, moved to PyTorch's layout.

- :class:`Stored`: an initializer as stored -- float, or integer with a zero point and a scale that
  broadcast against it (per tensor, or per channel along one axis);
- :class:`QuantizedTensor`: the integer form in PyTorch's layout, ``q - zero_point`` as int8 with its
  float32 scale (``values * scale`` is the dequantized weight, bit for bit);
- layout ops (:class:`Transpose`, :class:`Select`, :class:`Slice`, :class:`Gates`): the permutations
  that take a stored tensor to PyTorch's layout, applied alike to the values and to the broadcast scale.

Dequantization is onnxruntime's (``DequantizeLinear``, and what ``MatMulInteger`` / ``ConvInteger`` /
``DynamicQuantizeLSTM`` compute on their weights): ``float32(int32(q) - int32(zero_point)) * scale`` in
float32. Layout ops only move values, so dequantizing first or last gives the same bits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

_INT8 = np.iinfo(np.int8)


@dataclass(frozen=True)
class QuantizedTensor:
    """An int8 weight in PyTorch's layout: ``values`` (``q - zero_point``, the zero point applied already)
    and ``scale`` (float32, broadcastable against ``values``: a scalar, or per output channel)."""

    values: np.ndarray
    scale: np.ndarray

    def dequantize(self) -> np.ndarray:
        """``float32(values) * scale``: the float32 weight, equal to the importer's float tensor."""
        return self.values.astype(np.float32) * self.scale


class LayoutOp(Protocol):
    def shape(self, shape: tuple[int, ...]) -> tuple[int, ...]: ...

    def apply(self, array: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class Transpose:
    axes: tuple[int, ...]

    def shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(shape[a] for a in self.axes)

    def apply(self, array: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.transpose(array, self.axes))


@dataclass(frozen=True)
class Select:
    """Index ``index`` of the first axis (an LSTM's direction), the axis dropped."""

    index: int

    def shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return shape[1:]

    def apply(self, array: np.ndarray) -> np.ndarray:
        return array[self.index] if array.shape[0] > 1 else array[0]


@dataclass(frozen=True)
class Slice:
    """``[start:stop]`` of ``axis`` (one of an LSTM's two bias halves); a broadcast axis stays as it is."""

    axis: int
    start: int
    stop: int

    def shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(self.stop - self.start if i == self.axis else n for i, n in enumerate(shape))

    def apply(self, array: np.ndarray) -> np.ndarray:
        if array.shape[self.axis] == 1:
            return array
        index = [slice(None)] * array.ndim
        index[self.axis] = slice(self.start, self.stop)
        return array[tuple(index)]


#: ONNX LSTM gate blocks (i, o, f, c) taken in PyTorch's order (i, f, g = c, o).
GATE_ORDER = (0, 2, 3, 1)


@dataclass(frozen=True)
class Gates:
    """The four gate blocks of ``axis`` from ONNX's order (i, o, f, c) to PyTorch's (i, f, g, o)."""

    axis: int

    def shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return shape

    def apply(self, array: np.ndarray) -> np.ndarray:
        n = array.shape[self.axis]
        if n == 1:
            return array
        blocks = np.split(array, 4, axis=self.axis)
        return np.concatenate([blocks[i] for i in GATE_ORDER], axis=self.axis)


def broadcast_along(values: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    """A per-tensor (0-d or one value) or per-channel (1-D) scale or zero point shaped to broadcast
    along ``axis`` of an ``ndim``-D tensor; already broadcastable arrays are kept."""
    if values.ndim == 0 or values.size == 1:
        return values.reshape(())
    if values.ndim == 1:
        shape = [1] * ndim
        shape[axis] = values.shape[0]
        return values.reshape(shape)
    return values


@dataclass(frozen=True)
class Stored:
    """An initializer as the graph holds it; ``scale`` / ``zero_point`` (None for float storage)
    broadcast against ``array``."""

    array: np.ndarray
    scale: np.ndarray | None = None
    zero_point: np.ndarray | None = None

    @property
    def quantized(self) -> bool:
        return self.scale is not None

    def _difference(self) -> np.ndarray:
        q = self.array.astype(np.int32)
        return q if self.zero_point is None else q - self.zero_point.astype(np.int32)

    def float32(self) -> np.ndarray:
        if self.scale is None:
            return np.asarray(self.array, dtype=np.float32)
        return self._difference().astype(np.float32) * self.scale.astype(np.float32)

    def int8(self) -> QuantizedTensor | None:
        """The int8 form (``q - zero_point`` and the scale) where every difference fits in int8."""
        if self.scale is None:
            return None
        diff = self._difference()
        if diff.size and (diff.min() < _INT8.min or diff.max() > _INT8.max):
            return None
        shape = np.broadcast_shapes(self.scale.shape, (1,) * diff.ndim)
        scale = np.broadcast_to(self.scale.astype(np.float32), shape)
        return QuantizedTensor(diff.astype(np.int8), np.ascontiguousarray(scale))


def apply_layout(array: np.ndarray, ops: tuple[LayoutOp, ...]) -> np.ndarray:
    for op in ops:
        array = op.apply(array)
    return np.ascontiguousarray(array)


def layout_shape(shape: tuple[int, ...], ops: tuple[LayoutOp, ...]) -> tuple[int, ...]:
    for op in ops:
        shape = op.shape(shape)
    return shape


def quantized_in_layout(stored: Stored, ops: tuple[LayoutOp, ...]) -> QuantizedTensor | None:
    """The int8 form of ``stored`` moved by ``ops``; the scale squeezed to a scalar when it is one."""
    q = stored.int8()
    if q is None:
        return None
    values, scale = apply_layout(q.values, ops), apply_layout(q.scale, ops)
    return QuantizedTensor(values, scale.reshape(()) if scale.size == 1 else scale)
