"""A minimal, self-contained reader of ONNX model files (the protobuf wire format, no ``onnx`` import).

It reads what an importer of weights needs: the model's IR version and opsets, and its main graph --
nodes (name, op type, domain, inputs, outputs, attributes: floats, ints, strings, tensors, graphs and
their lists), initializers (``TensorProto``: name, dims, data type and data, either ``raw_data`` or the
typed repeated fields) and the names of the graph's inputs and outputs.

Memory: the file is memory-mapped; a tensor keeps a ``memoryview`` of its bytes and makes its numpy
array on demand (:meth:`Tensor.array`), so reading a 300 MB model costs its node table, not its weights.
Every length and offset is checked against the bytes that hold it: a truncated file, a file that is not
ONNX, or a tensor that claims more values than it holds raises ``ModelError("... is not a readable ONNX
model ...")`` with a hint, never an ``IndexError``. Tensors whose data lives in an external file
(``data_location = EXTERNAL``) are refused with a message naming them.

Field numbers are ``onnx/onnx.proto3``'s (ModelProto 7 = graph, GraphProto 1 = node, 5 = initializer...).
"""

from __future__ import annotations

import math
import mmap
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from audiocpp.engine.errors import ModelError

#: TensorProto.DataType -> (name, numpy little-endian dtype, the typed field that may hold it).
#: The typed field: 4 float_data, 5 int32_data, 7 int64_data, 10 double_data, 11 uint64_data.
DATA_TYPES: dict[int, tuple[str, str, int]] = {
    1: ("FLOAT", "<f4", 4),
    2: ("UINT8", "|u1", 5),
    3: ("INT8", "|i1", 5),
    4: ("UINT16", "<u2", 5),
    5: ("INT16", "<i2", 5),
    6: ("INT32", "<i4", 5),
    7: ("INT64", "<i8", 7),
    9: ("BOOL", "|b1", 5),
    10: ("FLOAT16", "<f2", 5),  # int32_data holds the 16-bit patterns
    11: ("DOUBLE", "<f8", 10),
    12: ("UINT32", "<u4", 11),
    13: ("UINT64", "<u8", 11),
}
#: Names of the types this reader knows but cannot make arrays of (for messages).
OTHER_TYPES = {0: "UNDEFINED", 8: "STRING", 14: "COMPLEX64", 15: "COMPLEX128", 16: "BFLOAT16",
               17: "FLOAT8E4M3FN", 18: "FLOAT8E4M3FNUZ", 19: "FLOAT8E5M2", 20: "FLOAT8E5M2FNUZ",
               21: "UINT4", 22: "INT4", 23: "FLOAT4E2M1"}

#: AttributeProto.AttributeType
FLOAT, INT, STRING, TENSOR, GRAPH, FLOATS, INTS, STRINGS, TENSORS, GRAPHS = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10

_HINT = ("give the .onnx file itself (one file, not split or cut short); re-download or re-assemble it and "
         "check its size and SHA-256")


class Malformed(Exception):
    """Raised inside the reader; :func:`read_model` turns it into a ``ModelError`` naming the file."""


# --- the wire format -------------------------------------------------------------------------------

def _varint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise Malformed(f"a number runs past the end of its message (byte {pos})")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise Malformed(f"a number longer than 10 bytes (byte {pos})")


def _signed(value: int) -> int:
    """A varint as protobuf's int64/int32 (two's complement over 64 bits)."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


@dataclass(frozen=True)
class _Field:
    number: int
    wire: int
    value: int  # varint value; for wire types 1, 2 and 5 the offset of the bytes
    size: int = 0  # bytes of a length-delimited / fixed field


def _fields(buf: memoryview, start: int, end: int) -> Iterator[_Field]:
    pos = start
    while pos < end:
        key, pos = _varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise Malformed(f"field number 0 at byte {pos}")
        if wire == 0:
            value, pos = _varint(buf, pos, end)
            yield _Field(number, wire, value)
        elif wire == 2:
            size, pos = _varint(buf, pos, end)
            if size > end - pos:
                raise Malformed(f"field {number} claims {size} bytes at byte {pos} but its message has "
                                f"{end - pos} left")
            yield _Field(number, wire, pos, size)
            pos += size
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if size > end - pos:
                raise Malformed(f"field {number} runs past the end of its message (byte {pos})")
            yield _Field(number, wire, pos, size)
            pos += size
        else:
            raise Malformed(f"unsupported wire type {wire} (field {number}, byte {pos})")


def _need(f: _Field, wire: int, what: str) -> None:
    if f.wire != wire:
        raise Malformed(f"{what}: wire type {f.wire}, expected {wire}")


def _string(buf: memoryview, f: _Field, what: str) -> str:
    _need(f, 2, what)
    try:
        return bytes(buf[f.value:f.value + f.size]).decode("utf-8")
    except UnicodeDecodeError:
        raise Malformed(f"{what} is not UTF-8 text") from None


def _ints(buf: memoryview, f: _Field, out: list[int], what: str) -> None:
    """A repeated int64/int32 field, packed (wire 2) or not (wire 0)."""
    if f.wire == 0:
        out.append(_signed(f.value))
        return
    _need(f, 2, what)
    pos, end = f.value, f.value + f.size
    while pos < end:
        value, pos = _varint(buf, pos, end)
        out.append(_signed(value))


def _fixed(buf: memoryview, f: _Field, width: int, out: list[memoryview], what: str) -> None:
    """A repeated fixed32/fixed64 field, packed (wire 2) or one value (wire 5 / 1): its bytes."""
    if f.wire == (5 if width == 4 else 1):
        out.append(buf[f.value:f.value + width])
        return
    _need(f, 2, what)
    if f.size % width:
        raise Malformed(f"{what}: {f.size} bytes is not a whole number of {width}-byte values")
    out.append(buf[f.value:f.value + f.size])


# --- ONNX messages ---------------------------------------------------------------------------------

@dataclass
class Tensor:
    """An ONNX ``TensorProto``; :meth:`array` makes its numpy array (a view of the file's bytes where
    the data is ``raw_data``)."""

    name: str
    dims: tuple[int, ...]
    data_type: int
    raw: memoryview | None = None
    #: typed repeated data: the field's number, its bytes (float_data, double_data) or its values (the rest)
    typed_fixed: list[memoryview] = field(default_factory=list)
    typed_ints: list[int] = field(default_factory=list)
    typed_field: int | None = None
    external: bool = False

    @property
    def type_name(self) -> str:
        known = DATA_TYPES.get(self.data_type)
        return known[0] if known else OTHER_TYPES.get(self.data_type, f"type {self.data_type}")

    @property
    def numel(self) -> int:
        return math.prod(self.dims)

    @property
    def dtype(self) -> np.dtype:
        known = DATA_TYPES.get(self.data_type)
        if known is None:
            supported = ", ".join(v[0] for v in DATA_TYPES.values())
            raise ModelError(f"ONNX tensor {self.name!r} has data type {self.type_name}, which this reader "
                             "does not convert", hint=f"supported: {supported}")
        return np.dtype(known[1])

    def array(self) -> np.ndarray:
        """The values, shaped ``dims`` (read-only where they view the file)."""
        dtype, count = self.dtype, self.numel
        if self.external:
            raise ModelError(f"ONNX tensor {self.name!r} keeps its data in an external file, which this "
                             "reader does not follow",
                             hint="save the model as one file "
                             "(onnx.save(..., save_as_external_data=False))")
        if self.raw is not None:
            if len(self.raw) != count * dtype.itemsize:
                raise ModelError(f"ONNX tensor {self.name!r} claims {count} values of {self.type_name} "
                                 f"(dims {list(self.dims)}: {count * dtype.itemsize} bytes) but holds "
                                 f"{len(self.raw)} bytes: the file is not a readable ONNX model", hint=_HINT)
            return np.frombuffer(self.raw, dtype=dtype, count=count).reshape(self.dims)
        if self.typed_field in (4, 10):
            data = b"".join(bytes(c) for c in self.typed_fixed)
            values = np.frombuffer(data, dtype="<f8" if self.typed_field == 10 else "<f4")
        elif self.typed_field in (5, 7, 11):
            values = np.asarray(self.typed_ints, dtype=np.uint64 if self.typed_field == 11 else np.int64)
            bits = np.dtype(np.uint16) if self.data_type == 10 else dtype
            if values.size and bits.kind in "iu" and (values.min() < np.iinfo(bits).min
                                                      or values.max() > np.iinfo(bits).max):
                raise ModelError(f"ONNX tensor {self.name!r} holds values outside {self.type_name}'s range: "
                                 "the file is not a readable ONNX model", hint=_HINT)
        else:
            values = np.zeros(0, dtype=dtype)
        if values.size != count:
            raise ModelError(f"ONNX tensor {self.name!r} holds {values.size} values but its dims "
                             f"{list(self.dims)} need {count}: the file is not a readable ONNX model",
                             hint=_HINT)
        if self.data_type == 10:  # float16 bit patterns in int32_data
            return values.astype(np.uint16).view(np.float16).reshape(self.dims)
        return values.astype(dtype).reshape(self.dims)


@dataclass
class Node:
    name: str
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attributes: dict[str, Any]

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attributes.get(name, default)


@dataclass
class Graph:
    name: str
    nodes: list[Node]
    initializers: dict[str, Tensor]
    inputs: list[str]
    outputs: list[str]


@dataclass
class Model:
    ir_version: int
    opsets: dict[str, int]
    producer: str
    graph: Graph
    path: Path | None = None
    #: the mapping that the tensors view (kept alive with the model)
    _buffer: Any = None


def _tensor(buf: memoryview, start: int, end: int) -> Tensor:
    name, dims, data_type = "", [], 0
    tensor = Tensor("", (), 0)
    for f in _fields(buf, start, end):
        n = f.number
        if n == 1:
            _ints(buf, f, dims, "TensorProto.dims")
        elif n == 2:
            _need(f, 0, "TensorProto.data_type")
            data_type = f.value
        elif n == 8:
            name = _string(buf, f, "TensorProto.name")
        elif n == 9:
            _need(f, 2, "TensorProto.raw_data")
            tensor.raw = buf[f.value:f.value + f.size]
        elif n in (4, 10):
            tensor.typed_field = n
            _fixed(buf, f, 4 if n == 4 else 8, tensor.typed_fixed, "TensorProto typed data")
        elif n in (5, 7, 11):
            tensor.typed_field = n
            _ints(buf, f, tensor.typed_ints, "TensorProto typed data")
            if n == 11:  # uint64_data: unsigned
                tensor.typed_ints[:] = [v & ((1 << 64) - 1) for v in tensor.typed_ints]
        elif n == 13:
            tensor.external = True
        elif n == 14:
            _need(f, 0, "TensorProto.data_location")
            tensor.external = tensor.external or f.value == 1
        elif n == 3:
            raise Malformed(f"tensor {name or '?'} is stored in segments, which ONNX files do not use")
    if any(d < 0 for d in dims):
        raise Malformed(f"tensor {name!r} has a negative dimension {dims}")
    tensor.name, tensor.dims, tensor.data_type = name, tuple(dims), data_type
    return tensor


def _attribute(buf: memoryview, start: int, end: int, depth: int) -> tuple[str, Any]:
    name, kind = "", 0
    scalars: dict[int, Any] = {}
    floats: list[memoryview] = []
    ints: list[int] = []
    strings: list[bytes] = []
    tensors: list[Tensor] = []
    graphs: list[Graph] = []
    for f in _fields(buf, start, end):
        n = f.number
        if n == 1:
            name = _string(buf, f, "AttributeProto.name")
        elif n == 20:
            _need(f, 0, "AttributeProto.type")
            kind = f.value
        elif n == 2:
            _need(f, 5, "AttributeProto.f")
            scalars[FLOAT] = struct.unpack("<f", buf[f.value:f.value + 4])[0]
        elif n == 3:
            _need(f, 0, "AttributeProto.i")
            scalars[INT] = _signed(f.value)
        elif n == 4:
            _need(f, 2, "AttributeProto.s")
            scalars[STRING] = bytes(buf[f.value:f.value + f.size])
        elif n == 5:
            _need(f, 2, "AttributeProto.t")
            scalars[TENSOR] = _tensor(buf, f.value, f.value + f.size)
        elif n == 6:
            _need(f, 2, "AttributeProto.g")
            scalars[GRAPH] = _graph(buf, f.value, f.value + f.size, depth + 1)
        elif n == 7:
            _fixed(buf, f, 4, floats, "AttributeProto.floats")
        elif n == 8:
            _ints(buf, f, ints, "AttributeProto.ints")
        elif n == 9:
            _need(f, 2, "AttributeProto.strings")
            strings.append(bytes(buf[f.value:f.value + f.size]))
        elif n == 10:
            _need(f, 2, "AttributeProto.tensors")
            tensors.append(_tensor(buf, f.value, f.value + f.size))
        elif n == 11:
            _need(f, 2, "AttributeProto.graphs")
            graphs.append(_graph(buf, f.value, f.value + f.size, depth + 1))
    if kind in scalars:
        return name, scalars[kind]
    if kind == FLOATS:
        return name, [float(v) for c in floats for v in np.frombuffer(c, dtype="<f4")]
    if kind == INTS:
        return name, ints
    if kind == STRINGS:
        return name, strings
    if kind == TENSORS:
        return name, tensors
    if kind == GRAPHS:
        return name, graphs
    # No type, or one this reader does not decode (sparse tensors, type protos): whatever it holds.
    return name, next(iter(scalars.values()), None)


def _node(buf: memoryview, start: int, end: int, depth: int) -> Node:
    name = op_type = domain = ""
    inputs: list[str] = []
    outputs: list[str] = []
    attributes: dict[str, Any] = {}
    for f in _fields(buf, start, end):
        n = f.number
        if n == 1:
            inputs.append(_string(buf, f, "NodeProto.input"))
        elif n == 2:
            outputs.append(_string(buf, f, "NodeProto.output"))
        elif n == 3:
            name = _string(buf, f, "NodeProto.name")
        elif n == 4:
            op_type = _string(buf, f, "NodeProto.op_type")
        elif n == 7:
            domain = _string(buf, f, "NodeProto.domain")
        elif n == 5:
            _need(f, 2, "NodeProto.attribute")
            key, value = _attribute(buf, f.value, f.value + f.size, depth)
            attributes[key] = value
    if not op_type:
        raise Malformed(f"node {name!r} has no op_type")
    return Node(name, op_type, domain, tuple(inputs), tuple(outputs), attributes)


def _value_info_name(buf: memoryview, start: int, end: int) -> str:
    for f in _fields(buf, start, end):
        if f.number == 1:
            return _string(buf, f, "ValueInfoProto.name")
    return ""


def _graph(buf: memoryview, start: int, end: int, depth: int = 0) -> Graph:
    if depth > 32:
        raise Malformed("graphs nested more than 32 deep")
    name = ""
    nodes: list[Node] = []
    initializers: dict[str, Tensor] = {}
    inputs: list[str] = []
    outputs: list[str] = []
    for f in _fields(buf, start, end):
        n = f.number
        if n == 1:
            _need(f, 2, "GraphProto.node")
            nodes.append(_node(buf, f.value, f.value + f.size, depth))
        elif n == 2:
            name = _string(buf, f, "GraphProto.name")
        elif n == 5:
            _need(f, 2, "GraphProto.initializer")
            tensor = _tensor(buf, f.value, f.value + f.size)
            if tensor.name in initializers:
                raise Malformed(f"two initializers are named {tensor.name!r}")
            initializers[tensor.name] = tensor
        elif n == 11:
            _need(f, 2, "GraphProto.input")
            inputs.append(_value_info_name(buf, f.value, f.value + f.size))
        elif n == 12:
            _need(f, 2, "GraphProto.output")
            outputs.append(_value_info_name(buf, f.value, f.value + f.size))
    return Graph(name, nodes, initializers, inputs, outputs)


def parse_model(buf: memoryview) -> Model:
    """A ``ModelProto`` from its bytes (raises :class:`Malformed`)."""
    ir_version, producer, graph = 0, "", None
    opsets: dict[str, int] = {}
    for f in _fields(buf, 0, len(buf)):
        n = f.number
        if n == 1:
            _need(f, 0, "ModelProto.ir_version")
            ir_version = f.value
        elif n == 2:
            producer = _string(buf, f, "ModelProto.producer_name")
        elif n == 8:
            _need(f, 2, "ModelProto.opset_import")
            domain, version = "", 0
            for g in _fields(buf, f.value, f.value + f.size):
                if g.number == 1:
                    domain = _string(buf, g, "OperatorSetIdProto.domain")
                elif g.number == 2:
                    _need(g, 0, "OperatorSetIdProto.version")
                    version = _signed(g.value)
            opsets[domain] = version
        elif n == 7:
            _need(f, 2, "ModelProto.graph")
            graph = _graph(buf, f.value, f.value + f.size)
    if graph is None or not ir_version:
        raise Malformed("it has no graph or no IR version")
    return Model(ir_version, opsets, producer, graph)


def read_model(path: str | Path) -> Model:
    """The ONNX model at ``path``, its tensors viewing a memory map of the file."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            size = path.stat().st_size
            if size == 0:
                raise ModelError(f"{path} is not a readable ONNX model: the file is empty", hint=_HINT)
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}",
                         hint="check the path and that the file is readable") from None
    try:
        model = parse_model(memoryview(mapped))
    except Malformed as exc:
        raise ModelError(f"{path} is not a readable ONNX model: {exc}", hint=_HINT) from None
    model.path, model._buffer = path, mapped
    return model
