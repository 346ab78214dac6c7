"""Plain GGUF files as a TensorSource (memory-mapped; quantized types dequantized)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..errors import ModelError
from .blocks import BLOCK_BYTES, BlockTensor, block_tensor, dequantize_raw
from .gguf_file import GGUFFile, GGUFTensorInfo, ggml_type_name
from .source import TensorInfo, TensorSource, cast, unknown_tensor

# ggml types stored as plain arrays: zero-copy numpy views of the memory map.
_PLAIN: dict[str, np.dtype] = {
    "F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "F64": np.dtype("<f8"),
    "BF16": np.dtype("<i2"),  # reinterpreted as torch.bfloat16 below
    "I8": np.dtype("i1"), "I16": np.dtype("<i2"), "I32": np.dtype("<i4"), "I64": np.dtype("<i8"),
}


def gguf_tensor(file: GGUFFile, info: GGUFTensorInfo, dtype: torch.dtype | None = None) -> torch.Tensor:
    """The tensor ``info`` of ``file`` in PyTorch order (ggml ``ne`` reversed).

    Plain types are zero-copy views of the memory map (float types keep their dtype
    unless ``dtype`` is given); block-quantized types are dequantized with
    ``gguf.quants.dequantize`` to float32 (then cast to ``dtype``).
    """
    name = ggml_type_name(info.ggml_type)
    shape = info.torch_shape
    raw = file.raw(info.name)
    plain = _PLAIN.get(name)
    if plain is not None:
        tensor = torch.from_numpy(raw.view(plain)).reshape(shape)
        if name == "BF16":
            tensor = tensor.view(torch.bfloat16)
        if (dtype is not None and dtype != tensor.dtype and info.nbytes > CHUNKED_CAST_BYTES
                and len(shape) >= 1):
            return _cast_releasing(file, info, tensor, dtype)
        return cast(tensor, dtype)
    from gguf import quants
    from gguf.constants import GGMLQuantizationType

    qtype = GGMLQuantizationType(info.ggml_type)
    if raw.size == 0:  # no elements (a zero dimension): nothing to dequantize
        return cast(torch.zeros(shape, dtype=torch.float32), dtype)
    rows = raw.reshape(-1, raw.size // max(1, _rows(info.ne)))
    try:
        if name in BLOCK_BYTES:  # Q8_0, Q4_0: the same float32 products, in torch
            if rows.shape[1] % BLOCK_BYTES[name]:
                raise ValueError(f"rows of {rows.shape[1]} bytes are not whole {name} blocks")
            return cast(dequantize_raw(name, raw).reshape(shape), dtype)
        values = quants.dequantize(rows, qtype)
        tensor = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32)).reshape(shape)
    except NotImplementedError:
        raise ModelError(
            f"{file.path}: tensor {info.name!r} is stored as {name}, which this version of the "
            "gguf package cannot dequantize",
            hint="upgrade the gguf package (pip install -U gguf) or re-quantize the model to a common "
            "type such as q8_0",
        ) from None
    except (ValueError, RuntimeError) as exc:  # a shape the blocks do not fill (a corrupt tensor info)
        raise ModelError(f"{file.path}: tensor {info.name!r} ({name}, shape {shape}) cannot be dequantized: "
                         f"{exc}",
                         hint="the file is damaged or was written by a broken converter; fetch or convert it "
                         "again") from None
    return cast(tensor, dtype)


#: Tensors larger than this are cast in row chunks, each chunk's file pages released once copied:
#: a 300 MB embedding table cast from F16 to bfloat16 never has both copies resident.
CHUNKED_CAST_BYTES = 64 << 20


def _cast_releasing(file: GGUFFile, info: GGUFTensorInfo, tensor: torch.Tensor,
                    dtype: torch.dtype) -> torch.Tensor:
    out = torch.empty(tensor.shape, dtype=dtype)
    rows = tensor.shape[0]
    row_bytes = max(1, info.nbytes // max(rows, 1))
    step = max(1, (16 << 20) // row_bytes)
    for lo in range(0, rows, step):
        hi = min(rows, lo + step)
        out[lo:hi].copy_(tensor[lo:hi])
        file.release_range(info.offset + lo * row_bytes, (hi - lo) * row_bytes)
    return out


def gguf_blocks(file: GGUFFile, info: GGUFTensorInfo,
                shape: tuple[int, ...] | None = None) -> BlockTensor | None:
    """The Q8_0 / Q4_0 matrix ``info`` as stored (its bytes a view of the mapping), when its
    PyTorch shape is 2-D and equals ``shape`` (the exact shape a package records); else None."""
    torch_shape = info.torch_shape
    if shape is not None and tuple(shape) != torch_shape:
        return None
    return block_tensor(ggml_type_name(info.ggml_type), torch_shape, file.raw(info.name))


def _rows(ne: tuple[int, ...]) -> int:
    count = 1
    for d in ne[1:]:
        count *= int(d)
    return count


class GGUFSource(TensorSource):
    """A GGUF file's tensors by their names in the file, shapes in PyTorch order."""

    format = "gguf"

    def __init__(self, path: str | Path | GGUFFile) -> None:
        self.gguf = path if isinstance(path, GGUFFile) else GGUFFile(path)
        self.path = self.gguf.path
        self.metadata = self.gguf.metadata
        self.files = {}
        self._infos = self.gguf.tensors

    def names(self) -> list[str]:
        return list(self._infos)

    def _require(self, name: str) -> GGUFTensorInfo:
        info = self._infos.get(name)
        if info is None:
            raise unknown_tensor(self, name)
        return info

    def info(self, name: str) -> TensorInfo:
        info = self._require(name)
        return TensorInfo(name, info.torch_shape, ggml_type_name(info.ggml_type))

    def get(self, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
        return gguf_tensor(self.gguf, self._require(name), dtype)

    def blocks(self, name: str) -> BlockTensor | None:
        return gguf_blocks(self.gguf, self._require(name))

    def release(self, name: str) -> None:
        self.gguf.release(self._require(name).name)

    def release_all(self) -> None:
        self.gguf.release_range(self.gguf.data_offset, self.gguf.size - self.gguf.data_offset)
