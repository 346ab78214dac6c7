"""Every tensor of ``KModel``'s state dict from kokoro-onnx's graph (int8 or float32), by node names and
op types.

Three passes, each only filling what the one before left:

1. **by node** -- every node that takes a weight, resolved to its KModel module through its scope
   (``graph.GraphIndex.module_of``):

   ============================================  ======================================================
   node                                          KModel tensors
   ============================================  ======================================================
   ``MatMul`` / ``MatMulInteger`` (B ``[in,out]``)  ``<m>.weight`` = B transposed; ``<m>.bias`` = the
                                                 ``[out]`` initializer added after it (``Add``, or a fused
                                                 ``FastGelu`` / ``SkipLayerNormalization`` bias input)
   ``Gemm``                                      ``<m>.weight`` (B, transposed unless ``transB``), C
   ``Conv`` / ``ConvInteger`` / ``ConvTranspose``  ``<m>.weight`` as stored (weight norm already folded by
                                                 the exporter), ``Conv``'s and ``ConvTranspose``'s C
   ``LSTM`` / ``DynamicQuantizeLSTM``            ``weight_ih_l0``, ``weight_hh_l0``, ``bias_ih_l0``,
                                                 ``bias_hh_l0`` (and ``_reverse`` from direction 1): W and R
                                                 (``DynamicQuantizeLSTM``'s ``[dir, in, 4H]`` transposed),
                                                 B's two halves; gate blocks from ONNX's i, o, f, c to
                                                 PyTorch's i, f, g, o
   ``Gather`` (+ ``DequantizeLinear``)           ``<m>.weight`` (the embedding tables)
   ``LayerNormalization`` / ``SkipLayerNorm...``  the module's own two parameters (``weight``/``bias``, or
                                                 StyleTTS2's ``gamma``/``beta``); AdaLayerNorm has none
   ``InstanceNormalization``                     ``<m>.weight``, ``<m>.bias``
   ============================================  ======================================================

   Integer weights are dequantized as onnxruntime does (``values.Stored``), per output column for
   ``MatMulInteger`` (per-column scales and zero points), per tensor for ``ConvInteger`` (one uint8 zero
   point and scale) and per direction for ``DynamicQuantizeLSTM``; the weight scale of ``MatMulInteger`` /
   ``ConvInteger`` is not an input of the node but of the ``Mul`` that rescales its output
   (``GraphIndex.weight_scale``).
2. **by name** -- float initializers the export left under their module path (``decoder.decoder.X`` ->
   ``decoder.X``, ``encoder.predictor.X`` -> ``predictor.X``; no 2-D tensors, whose layout a name cannot
   tell): the biases of quantized convolutions (which only feed onnxruntime's bias quantization), the
   Snake ``alpha*`` of the generator's residual blocks (read as stored, never as ``1 / Reciprocal``: the
   export keeps both ``alpha`` and the constant-folded ``1/alpha``, and only ``alpha`` is exact), norms.
3. **AdaIN instance norms** -- kokoro-onnx's export has no affine parameters for them (hexgrad's checkpoint
   has none; upstream builds them as ones and zeros): for each ``AdaIN1d`` whose ``norm.weight`` /
   ``norm.bias`` nothing above gave, the graph is checked to apply no per-channel constant inside the
   module's scope (only the ``fc`` and scalar constants such as epsilon and the ``1 +`` of ``1 + gamma``),
   and they are ones and zeros. Anything else is an error naming the module.

A tensor found by no pass is a ``ModelError`` naming it, never zeros.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from audiocpp.engine.errors import ModelError

from .graph import FLOAT_TYPES, GraphIndex
from .protobuf import Graph, Node
from .values import (
    Gates,
    LayoutOp,
    QuantizedTensor,
    Select,
    Slice,
    Stored,
    Transpose,
    apply_layout,
    broadcast_along,
    layout_shape,
    quantized_in_layout,
)

_HINT = "this importer reads kokoro-onnx's Kokoro-82M exports (kokoro-v1.0.onnx, kokoro-v1.0.int8.onnx)"


@dataclass(frozen=True)
class Found:
    """One KModel tensor: where it is stored and how it moves to PyTorch's layout."""

    name: str
    stored: Stored
    ops: tuple[LayoutOp, ...]
    origin: str  # for messages and reports: the node or initializer it came from
    key: str  # the initializer(s) it reads, to tell a repeated use from a conflict

    @property
    def shape(self) -> tuple[int, ...]:
        return layout_shape(tuple(self.stored.array.shape), self.ops)

    def float32(self) -> np.ndarray:
        return apply_layout(self.stored.float32(), self.ops)

    def quantized(self) -> QuantizedTensor | None:
        return quantized_in_layout(self.stored, self.ops)


@dataclass
class Mapping:
    found: dict[str, Found]
    #: AdaIN instance-norm parameters the export provably lacks, given upstream's ones / zeros
    defaults: list[str] = field(default_factory=list)
    #: "int8" when any weight is stored as integers, else "float32"
    kind: str = "float32"


class _Mapper:
    def __init__(self, graph: Graph, model: torch.nn.Module) -> None:
        self.modules = dict(model.named_modules())
        self.expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
        self.index = GraphIndex(graph, self.modules)
        self.found: dict[str, Found] = {}
        self.claimed: set[str] = set()

    # --- recording ----------------------------------------------------------------------------
    def put(self, name: str, stored: Stored, ops: tuple[LayoutOp, ...], node: Node, key: str) -> None:
        origin = f"{node.op_type} {node.name or node.outputs[0]!r} ({key})"
        found = Found(name, stored, ops, origin, key)
        if name not in self.expected:
            raise ModelError(f"ONNX node {origin} maps to {name!r}, which the model does not have",
                             hint=_HINT)
        if found.shape != self.expected[name]:
            raise ModelError(f"ONNX node {origin} gives {name} the shape {list(found.shape)}, but the model "
                             f"wants {list(self.expected[name])}", hint=_HINT)
        self.claimed.add(key)
        earlier = self.found.get(name)
        if earlier is None:
            self.found[name] = found
        elif earlier.key != key and not np.array_equal(earlier.float32(), found.float32()):
            raise ModelError(f"the ONNX graph gives {name} two different values: {earlier.origin} and "
                             f"{origin}", hint=_HINT)

    def param(self, module: str, attr: str) -> str:
        return f"{module}.{attr}" if module else attr

    # --- pass 1: by node ------------------------------------------------------------------------
    def by_node(self) -> None:
        rules: dict[str, Callable[[Node, str], None]] = {
            "MatMul": self.matmul, "MatMulInteger": self.matmul, "FusedMatMul": self.matmul,
            "Gemm": self.gemm,
            "Conv": self.conv, "ConvInteger": self.conv, "ConvTranspose": self.conv,
            "LSTM": self.lstm, "DynamicQuantizeLSTM": self.lstm,
            "Gather": self.gather,
            "LayerNormalization": self.norm, "SkipLayerNormalization": self.norm,
            "InstanceNormalization": self.norm,
        }
        for node in self.index.graph.nodes:
            rule = rules.get(node.op_type)
            if rule is None:
                continue
            module, complete = self.index.module_of(node)
            if complete:
                rule(node, module)

    def integer_weight(self, node: Node, axis: int) -> Stored:
        """Input 1 of ``MatMulInteger`` / ``ConvInteger`` with its zero point (input 3) and scale."""
        index = self.index
        q = index.constant(node.inputs[1], node)
        scale = index.array(index.weight_scale(node))
        zero = index.input(node, 3)
        return Stored(q, broadcast_along(scale, axis, q.ndim),
                      broadcast_along(index.constant(zero, node), axis, q.ndim) if zero else None)

    def weight(self, node: Node, axis: int) -> tuple[Stored, str] | None:
        name = self.index.input(node, 1)
        if node.op_type in ("MatMulInteger", "ConvInteger"):
            if name not in self.index.init:
                return None
            return self.integer_weight(node, axis), name
        stored = self.index.stored(name)
        return (stored, name) if stored is not None else None

    def matmul(self, node: Node, module: str) -> None:
        got = self.weight(node, axis=1)
        if got is None:
            return  # a product of two activations (attention)
        stored, key = got
        if node.op_type == "FusedMatMul" and (node.attr("alpha", 1.0) != 1.0 or node.attr("transBatchB", 0)):
            raise ModelError(f"ONNX node {node.name!r} scales or batch-transposes its weight", hint=_HINT)
        if stored.array.ndim != 2:
            raise ModelError(f"ONNX node {node.name!r} multiplies by a {stored.array.ndim}-D weight {key!r}",
                             hint=_HINT)
        ops: tuple[LayoutOp, ...] = () if node.attr("transB", 0) else (Transpose((1, 0)),)
        self.put(self.param(module, "weight"), stored, ops, node, key)
        width = stored.array.shape[0 if node.attr("transB", 0) else 1]
        bias = self.index.bias_after(node, width)
        if bias is not None:
            self.put(self.param(module, "bias"), Stored(self.index.array(bias)), (), node, bias)

    def gemm(self, node: Node, module: str) -> None:
        got = self.weight(node, axis=1)
        if got is None:
            return
        if node.attr("alpha", 1.0) != 1.0 or node.attr("beta", 1.0) != 1.0:
            raise ModelError(f"ONNX Gemm {node.name!r} scales its operands (alpha/beta != 1)", hint=_HINT)
        stored, key = got
        ops: tuple[LayoutOp, ...] = () if node.attr("transB", 0) else (Transpose((1, 0)),)
        self.put(self.param(module, "weight"), stored, ops, node, key)
        bias = self.index.stored(self.index.input(node, 2))
        if bias is not None:
            self.put(self.param(module, "bias"), bias, (), node, node.inputs[2])

    def conv(self, node: Node, module: str) -> None:
        got = self.weight(node, axis=0)  # ConvInteger: per output channel when per channel
        if got is None:
            return
        stored, key = got
        self.put(self.param(module, "weight"), stored, (), node, key)
        if node.op_type != "ConvInteger":
            bias = self.index.stored(self.index.input(node, 2))
            if bias is not None:
                self.put(self.param(module, "bias"), bias, (), node, node.inputs[2])

    def lstm(self, node: Node, module: str) -> None:
        index = self.index
        direction = node.attr("direction", b"forward")
        direction = direction.decode() if isinstance(direction, bytes) else str(direction)
        acts = [a.decode() if isinstance(a, bytes) else a for a in node.attr("activations", [])]
        if direction not in ("forward", "bidirectional") or node.attr("clip") is not None \
                or node.attr("input_forget", 0) or node.attr("layout", 0) \
                or acts not in ([], ["Sigmoid", "Tanh", "Tanh"] * (2 if direction == "bidirectional" else 1)):
            raise ModelError(f"ONNX LSTM {node.name!r} is not a plain PyTorch LSTM (direction {direction}, "
                             f"activations {acts or 'default'})", hint=_HINT)
        hidden = int(node.attr("hidden_size", 0))
        quantized = node.op_type == "DynamicQuantizeLSTM"
        stores: dict[str, tuple[Stored, str]] = {}
        for slot, i in (("W", 1), ("R", 2)):
            name = index.input(node, i)
            if quantized:
                q = index.constant(name, node)
                scale = index.constant(index.input(node, 8 if slot == "W" else 10), node)
                zero_name = index.input(node, 9 if slot == "W" else 11)
                zero = _per_direction(index.constant(zero_name, node), q.ndim) if zero_name else None
                stores[slot] = (Stored(q, _per_direction(scale, q.ndim), zero), name)
            else:
                stored = index.stored(name)
                if stored is None:
                    return
                stores[slot] = (stored, name)
        directions = 2 if direction == "bidirectional" else 1
        bias_name = index.input(node, 3)
        zeros = Stored(np.zeros((directions, 8 * hidden), np.float32))  # ONNX's default: no bias
        bias = index.stored(bias_name) if bias_name else zeros
        if bias is None:
            raise ModelError(f"ONNX LSTM {node.name!r} takes a computed bias", hint=_HINT)
        transpose: tuple[LayoutOp, ...] = (Transpose((1, 0)),) if quantized else ()
        for d in range(directions):
            suffix = "_reverse" if d else ""
            for slot, target in (("W", "weight_ih_l0"), ("R", "weight_hh_l0")):
                stored, key = stores[slot]
                ops: tuple[LayoutOp, ...] = (Select(d), *transpose, Gates(0))
                self.put(self.param(module, target + suffix), stored, ops, node, key)
            for half, target in ((0, "bias_ih_l0"), (1, "bias_hh_l0")):
                ops = (Select(d), Slice(0, half * 4 * hidden, (half + 1) * 4 * hidden), Gates(0))
                self.put(self.param(module, target + suffix), bias, ops, node, bias_name or "zeros")

    def gather(self, node: Node, module: str) -> None:
        index = self.index
        table = node.inputs[0]
        stored = index.stored(table)
        if stored is None and table in index.init:  # Gather over integers, DequantizeLinear after it
            users = index.consumers.get(node.outputs[0], [])
            dequant = [u for u in users if u.op_type == "DequantizeLinear"]
            if len(users) != 1 or not dequant:
                return
            scale = index.constant(index.input(dequant[0], 1), dequant[0])
            if scale.size != 1:
                raise ModelError(f"ONNX embedding {table!r} is dequantized per channel after its Gather",
                                 hint=_HINT)
            stored = index.dequantize(dequant[0], index.array(table), axis=0)
        if stored is None or node.attr("axis", 0) != 0:
            return
        self.put(self.param(module, "weight"), stored, (), node, table)

    def norm(self, node: Node, module: str) -> None:
        own = list(self.modules[module]._parameters)
        if not own:
            return  # AdaLayerNorm: a parameter-free layer norm (the export's ones / zeros are constants)
        first = 1 if node.op_type in ("LayerNormalization", "InstanceNormalization") else 2
        for attr, i in zip(own, (first, first + 1)):
            name = self.index.input(node, i)
            stored = self.index.stored(name) if name else None
            if stored is not None:
                self.put(self.param(module, attr), stored, (), node, name)

    # --- pass 2: by name ------------------------------------------------------------------------
    def by_name(self) -> None:
        index = self.index
        for name, tensor in index.init.items():
            if name in self.claimed or tensor.data_type not in FLOAT_TYPES or len(tensor.dims) == 2:
                continue
            target = index.kmodel_name(name, self.expected)
            if target is None or target in self.found or tensor.dims != self.expected[target]:
                continue
            self.found[target] = Found(target, Stored(index.array(name)), (), f"initializer {name!r}", name)
            self.claimed.add(name)

    # --- pass 3: AdaIN instance norms ---------------------------------------------------------------
    def instance_norm_defaults(self) -> list[str]:
        from ..model.istftnet import AdaIN1d

        adains = {name for name, m in self.modules.items() if isinstance(m, AdaIN1d)}
        missing = {n.rsplit(".", 2)[0] for n in self.expected
                   if n not in self.found and n.endswith((".norm.weight", ".norm.bias"))
                   and n.rsplit(".", 2)[0] in adains}
        constants: dict[str, list[str]] = {m: [] for m in missing}
        seen: set[str] = set()
        for node in self.index.graph.nodes:
            module, _ = self.index.module_of(node)
            owner = module[: -len(".norm")] if module.endswith(".norm") else module
            if owner not in missing:
                continue
            seen.add(owner)
            constants[owner] += [i for i in node.inputs
                                 if self.index.is_float_init(i) and self.index.init[i].numel > 1]
        defaults = []
        for module in sorted(missing):
            if module not in seen or constants[module]:
                why = (f"it applies {constants[module][0]!r} inside the module" if constants[module]
                       else "no node of the graph belongs to it")
                raise ModelError(f"cannot tell the instance-norm parameters of {module} from the ONNX graph: "
                                 f"{why}", hint=_HINT)
            width = self.modules[module].norm.num_features
            for attr, fill in (("weight", np.ones), ("bias", np.zeros)):
                name = f"{module}.norm.{attr}"
                if name not in self.found:
                    origin = "upstream's initial value (the export has no affine instance norm)"
                    value = Stored(fill(width, dtype=np.float32))
                    self.found[name] = Found(name, value, (), origin, "default")
                    defaults.append(name)
        return defaults


def _per_direction(values: np.ndarray, ndim: int) -> np.ndarray:
    """An LSTM scale / zero point (``[dir]``, or ``[dir, 4H]`` per column) broadcast over
    ``[dir, in, 4H]``."""
    if values.ndim == 1:
        return values.reshape((-1,) + (1,) * (ndim - 1))
    if values.ndim == 2:
        return values.reshape(values.shape[0], 1, values.shape[1])
    return values


def map_weights(graph: Graph, model: torch.nn.Module) -> Mapping:
    """Every tensor of ``model.state_dict()`` (a ``KModel``, on meta is enough) found in ``graph``."""
    mapper = _Mapper(graph, model)
    mapper.by_node()
    mapper.by_name()
    defaults = mapper.instance_norm_defaults()
    missing = [n for n in mapper.expected if n not in mapper.found]
    if missing:
        raise ModelError(f"the ONNX graph has no value for {len(missing)} of the model's tensors: "
                         f"{', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}", hint=_HINT)
    kind = "int8" if any(f.stored.quantized for f in mapper.found.values()) else "float32"
    return Mapping({n: mapper.found[n] for n in mapper.expected}, defaults, kind)
