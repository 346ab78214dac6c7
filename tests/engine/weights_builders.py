"""Builders for the weights tests: audio.cpp-layout package GGUFs, plain GGUFs, checkpoints.

``write_package`` lays a package out exactly as audio.cpp's ``audiocpp_gguf`` does (see
``audiocpp.engine.weights.package``), independently of ``audiocpp.engine.packaging``, so the
reader is tested against the layout itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import gguf
import numpy as np
from gguf.constants import GGUFValueType

MAX_NAME = 63


def _put(writer: gguf.GGUFWriter, name: str, array: np.ndarray, qtype: str | None) -> None:
    if qtype is None or qtype in ("F32", "F16"):
        writer.add_tensor(name, array)
        return
    t = gguf.GGMLQuantizationType[qtype]
    writer.add_tensor(name, gguf.quants.quantize(array.astype(np.float32), t), raw_dtype=t)


def write_gguf(path: Path, tensors: Mapping[str, np.ndarray], *, arch: str = "test",
               metadata: Mapping[str, object] | None = None, types: Mapping[str, str] | None = None) -> Path:
    """A plain GGUF; ``types`` maps a tensor name to a gguf.quants type (``Q8_0``, ``BF16``...)."""
    writer = gguf.GGUFWriter(str(path), arch)
    for key, value in (metadata or {}).items():
        if isinstance(value, str):
            writer.add_string(key, value)
        elif isinstance(value, int):
            writer.add_uint32(key, value)
        else:
            writer.add_array(key, value)
    for name, array in tensors.items():
        _put(writer, name, array, (types or {}).get(name))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_package(path: Path, tensors: Mapping[str, np.ndarray], *, files: Mapping[str, bytes] | None = None,
                  legacy_files: bool = False, spec: Mapping | None = None, family: str | None = None,
                  flatten: Mapping[str, tuple[int, ...]] | None = None,
                  types: Mapping[str, str] | None = None, weight_type: str = "orig") -> Path:
    """An audio.cpp-layout package. ``tensors`` maps logical names (``ns/name``) to arrays in
    PyTorch shape; ``flatten`` stores a tensor in another physical shape (conv weight as 2-D);
    scalars are stored as ``[1]``; long or duplicated physical names become ``_audiocpp.<i>``."""
    writer = gguf.GGUFWriter(str(path), "audiocpp")
    writer.add_string("general.name", path.stem)
    writer.add_string("audiocpp.tensor_name_format", "native")
    writer.add_string("audiocpp.source_format", "packed")
    writer.add_string("audiocpp.weight_type", weight_type)
    if spec is not None:
        writer.add_uint32("audiocpp.model_spec.version", 1)
        writer.add_string("audiocpp.model_spec.family", family or spec["family"])
        writer.add_string("audiocpp.model_spec.json", json.dumps(spec))
    if files:
        names = list(files)
        writer.add_array("audiocpp.embedded_files.names", names)
        if legacy_files:
            writer.add_array("audiocpp.embedded_files.contents", [files[n].decode() for n in names])
        else:
            offsets = [0]
            for n in names:
                offsets.append(offsets[-1] + len(files[n]))
            writer.add_key_value("audiocpp.embedded_files.offsets", offsets, GGUFValueType.ARRAY,
                                 sub_type=GGUFValueType.UINT64)
            writer.add_key_value("audiocpp.embedded_files.data", b"".join(files[n] for n in names),
                                 GGUFValueType.ARRAY, sub_type=GGUFValueType.UINT8)
    logical = list(tensors)
    ranks, shapes = [], []
    seen: set[str] = set()
    for i, name in enumerate(logical):
        array = np.asarray(tensors[name])
        ranks.append(array.ndim)
        shapes.extend(int(d) for d in array.shape)
        physical = name
        if len(physical.encode()) > MAX_NAME or physical in seen:
            physical = f"_audiocpp.{i}"
        seen.add(physical)
        stored = array.reshape((flatten or {}).get(name, array.shape)) if array.ndim else array.reshape(1)
        _put(writer, physical, stored, (types or {}).get(name))
    writer.add_array("audiocpp.tensor_names", logical)
    writer.add_key_value("audiocpp.tensor_ranks", ranks, GGUFValueType.ARRAY, sub_type=GGUFValueType.INT32)
    if shapes:
        writer.add_key_value("audiocpp.tensor_shapes", shapes, GGUFValueType.ARRAY,
                             sub_type=GGUFValueType.INT64)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
