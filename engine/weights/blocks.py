"""Block-quantized GGUF tensors as they are stored, for the kernels that compute with them.

A :class:`BlockTensor` is a 2-D weight ``(rows, cols)`` (PyTorch order: one row per output
feature) whose bytes stay a view of the memory-mapped file. Two ggml layouts are read:

- ``Q8_0``: blocks of 32 values along a row, each ``f16 d`` + ``int8 q[32]`` (34 bytes); value = q * d.
- ``Q4_0``: blocks of 32, each ``f16 d`` + 16 bytes of nibbles; value = (nibble - 8) * d, the low
  nibbles of the 16 bytes being values 0..15 of the block and the high nibbles values 16..31.

``engine.nn.linear.quantized`` turns them into int8 / int4 linear layers; :meth:`BlockTensor.dequantize`
gives the float32 matrix (what ``gguf.quants.dequantize`` gives) for the paths that widen.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

BLOCK = 32
#: ggml type name -> bytes per block of 32 values
BLOCK_BYTES = {"Q8_0": 2 + 32, "Q4_0": 2 + 16}


@dataclass(frozen=True)
class BlockTensor:
    """A ``(rows, cols)`` Q8_0 / Q4_0 matrix: ``data`` is its bytes, ``rows x blocks x block bytes``."""

    qtype: str
    shape: tuple[int, int]
    data: np.ndarray  # uint8 view of the file, C-contiguous

    def __post_init__(self) -> None:
        rows, cols = self.shape
        if self.qtype not in BLOCK_BYTES:
            raise ValueError(f"{self.qtype} is not a supported block type")
        if cols % BLOCK or self.data.size != rows * cols // BLOCK * BLOCK_BYTES[self.qtype]:
            raise ValueError(f"{self.qtype} data of {self.data.size} bytes does not hold a {self.shape} "
                             "matrix")

    @property
    def nbytes(self) -> int:
        return int(self.data.size)

    def row_slice(self, lo: int, hi: int) -> BlockTensor:
        """Rows ``lo:hi`` as a block tensor over the same bytes."""
        rows, cols = self.shape
        lo, hi = max(0, lo), min(rows, hi)
        per_row = cols // BLOCK * BLOCK_BYTES[self.qtype]
        return BlockTensor(self.qtype, (hi - lo, cols), self.data.reshape(-1)[lo * per_row:hi * per_row])

    def _blocks(self) -> np.ndarray:
        rows, cols = self.shape
        return self.data.reshape(rows, cols // BLOCK, BLOCK_BYTES[self.qtype])

    def scales(self) -> np.ndarray:
        """The per-block scales ``d`` as float32, ``(rows, cols / 32)``."""
        return np.ascontiguousarray(self._blocks()[:, :, :2]).view(np.float16)[..., 0].astype(np.float32)

    def q8(self) -> np.ndarray:
        """Q8_0: the int8 values ``(rows, cols)`` (a copy, contiguous)."""
        if self.qtype != "Q8_0":
            raise ValueError(f"{self.qtype} has no int8 values")
        rows, cols = self.shape
        return np.ascontiguousarray(self._blocks()[:, :, 2:]).view(np.int8).reshape(rows, cols)

    def nibbles(self) -> np.ndarray:
        """Q4_0: the 4-bit values 0..15 ``(rows, cols)`` as uint8 (value = (nibble - 8) * d)."""
        if self.qtype != "Q4_0":
            raise ValueError(f"{self.qtype} has no 4-bit values")
        rows, cols = self.shape
        packed = self._blocks()[:, :, 2:]
        out = np.empty((rows, cols // BLOCK, BLOCK), dtype=np.uint8)
        np.bitwise_and(packed, 0x0F, out=out[:, :, :16])
        np.right_shift(packed, 4, out=out[:, :, 16:])
        return out.reshape(rows, cols)

    def values(self) -> np.ndarray:
        """The integer values as int8 ``(rows, cols)`` (Q4_0: nibble - 8)."""
        if self.qtype == "Q8_0":
            return self.q8()
        return (self.nibbles().astype(np.int8) - 8).astype(np.int8)

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The float matrix: ``values * d`` per block, in float32 (then ``dtype``)."""
        out = dequantize_raw(self.qtype, self.data).reshape(self.shape)
        return out if dtype == torch.float32 else out.to(dtype)


def dequantize_raw(qtype: str, data: np.ndarray) -> torch.Tensor:
    """Q8_0 / Q4_0 bytes (whole blocks) as float32 values, flat: ``float(q) * float(d)`` per value,
    the float32 products ``gguf.quants.dequantize`` computes, in torch's threads (several times
    faster than numpy's one pass per step)."""
    per = BLOCK_BYTES[qtype]
    blocks = torch.from_numpy(data.reshape(-1, per) if data.flags.writeable else data.reshape(-1, per).copy())
    d = blocks[:, :2].contiguous().view(torch.float16).float()
    if qtype == "Q8_0":
        q = blocks[:, 2:].view(torch.int8)
    else:
        nibbles = blocks[:, 2:]
        q = torch.cat([nibbles & 0x0F, nibbles >> 4], dim=1).view(torch.int8) - 8
    return (q.float() * d).reshape(-1)


def block_tensor(qtype: str, shape: tuple[int, ...], data: np.ndarray) -> BlockTensor | None:
    """A :class:`BlockTensor` for a 2-D tensor stored as Q8_0 / Q4_0, else None."""
    if qtype not in BLOCK_BYTES or len(shape) != 2 or shape[1] % BLOCK or shape[0] == 0:
        return None
    try:
        return BlockTensor(qtype, (int(shape[0]), int(shape[1])), data)
    except ValueError:
        return None
