"""Reading an ONNX graph the way the weight mapping needs it: who produces and who consumes a tensor, what
an input holds (a float initializer, or an integer one with its scale and zero point), and which module
of ``KModel`` a node belongs to.

Scopes: the PyTorch exporter names nodes ``/<module path with '/'>/<op>`` (``/decoder/decoder/decode.0/conv1/
Conv``), and nodes that onnxruntime's optimizer made (``SkipLayerNormalization_token_111``) keep the scope in
their output's name. kokoro-onnx exported a wrapper whose ``encoder`` holds ``bert``, ``bert_encoder``,
``predictor`` and ``text_encoder`` (the predictor's F0/N blocks and its ``shared`` LSTM were traced at the
wrapper's level: ``/encoder/F0.0/...``, ``/encoder/shared/...``) and whose ``decoder`` holds ``decoder``.
:meth:`GraphIndex.module_of` drops the wrapper level, tries the path from KModel's root and then under
``predictor``, strips the ``_<n>`` suffix that the exporter gives repeated calls of one module (ALBERT's
shared layer: ``attention_1``, ``ffn_11``), and collapses ``nn.Sequential``'s doubled names
(``cnn.0/cnn.0.0`` -> ``cnn.0.0``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable

import numpy as np

from audiocpp.engine.errors import ModelError

from .protobuf import Graph, Node, Tensor
from .values import Stored, broadcast_along

#: The export wrapper's first scope level, dropped.
WRAPPERS = ("encoder", "decoder")
#: Where a path under the wrapper may start in KModel: its root, or inside the predictor.
ROOTS = ("", "predictor")
_REPEAT = re.compile(r"(.+)_(\d+)")
FLOAT_TYPES = (1, 10, 11)  # FLOAT, FLOAT16, DOUBLE


class GraphIndex:
    def __init__(self, graph: Graph, modules: Iterable[str]) -> None:
        self.graph = graph
        self.init: dict[str, Tensor] = graph.initializers
        self.producer: dict[str, Node] = {}
        self.consumers: dict[str, list[Node]] = defaultdict(list)
        for node in graph.nodes:
            for out in node.outputs:
                if out:
                    self.producer[out] = node
            for name in node.inputs:
                if name:
                    self.consumers[name].append(node)
        self.modules = frozenset(modules)
        self._arrays: dict[str, np.ndarray] = {}

    # --- values ---------------------------------------------------------------------------------
    def array(self, name: str) -> np.ndarray:
        """An initializer's values (made once)."""
        if name not in self._arrays:
            self._arrays[name] = self.init[name].array()
        return self._arrays[name]

    def is_float_init(self, name: str) -> bool:
        tensor = self.init.get(name)
        return tensor is not None and tensor.data_type in FLOAT_TYPES

    def input(self, node: Node, i: int) -> str:
        return node.inputs[i] if i < len(node.inputs) else ""

    def stored(self, name: str) -> Stored | None:
        """What tensor ``name`` holds when it is a weight: a float initializer, or ``DequantizeLinear``
        over an integer initializer (QDQ form); None for activations."""
        if self.is_float_init(name):
            return Stored(self.array(name))
        node = self.producer.get(name)
        if node is not None and node.op_type == "DequantizeLinear" and node.inputs[0] in self.init:
            q = self.array(node.inputs[0])
            return self.dequantize(node, q, axis=node.attr("axis", 1))
        return None

    def dequantize(self, node: Node, q: np.ndarray, axis: int) -> Stored:
        """``DequantizeLinear``'s scale (input 1) and zero point (input 2) over ``q``."""
        if node.attr("block_size", 0):
            raise ModelError(f"ONNX node {node.name!r} dequantizes in blocks, which this importer does not "
                             "read")
        scale = self.constant(self.input(node, 1), node)
        zero = self.input(node, 2)
        axis = axis % max(q.ndim, 1)
        return Stored(q, broadcast_along(scale, axis, q.ndim),
                      broadcast_along(self.constant(zero, node), axis, q.ndim) if zero else None)

    def constant(self, name: str, node: Node) -> np.ndarray:
        if name not in self.init:
            raise ModelError(f"ONNX node {node.name!r} takes {name!r} as a constant, but it is computed in "
                             "the graph; this importer reads weights stored as initializers")
        return self.array(name)

    # --- walking ------------------------------------------------------------------------------
    def activation_scale(self, node: Node) -> str | None:
        """The scale output of the ``DynamicQuantizeLinear`` that quantized ``node``'s input 0."""
        source = self.producer.get(node.inputs[0])
        if source is not None and source.op_type == "DynamicQuantizeLinear" and len(source.outputs) > 1:
            return source.outputs[1]
        return None

    def weight_scale(self, node: Node) -> str:
        """The weight scale of an integer ``MatMulInteger`` / ``ConvInteger``: onnxruntime's quantizer
        multiplies it with the activation's scale (``Mul(act_scale, w_scale)``) and the product with the
        integer result (possibly after a bias ``Add`` and a ``Cast``)."""
        act = self.activation_scale(node)
        frontier, seen = [node.outputs[0]], set()
        for _ in range(6):
            following = []
            for tensor in frontier:
                for user in self.consumers.get(tensor, ()):
                    if id(user) in seen:
                        continue
                    seen.add(id(user))
                    if user.op_type == "Mul":
                        for other in user.inputs:
                            product = self.producer.get(other)
                            if other == tensor or product is None or product.op_type != "Mul":
                                continue
                            rest = [i for i in product.inputs if i != act]
                            if act in product.inputs and len(rest) == 1 and rest[0] in self.init:
                                return rest[0]
                    if user.op_type in ("Cast", "Add", "Reshape", "Mul"):
                        following.extend(user.outputs)
            frontier = following
        raise ModelError(f"cannot find the weight scale of ONNX node {node.name!r} ({node.op_type})",
                         hint="this importer reads onnxruntime's dynamic quantization "
                         "(DynamicQuantizeLinear -> MatMulInteger/ConvInteger -> Mul by the scales)")

    def bias_after(self, node: Node, width: int) -> str | None:
        """The float bias added to a matrix product's output: an ``Add`` with a ``[width]`` initializer,
        or the bias input of a fused ``FastGelu`` / ``BiasGelu`` / ``SkipLayerNormalization``, reached
        through ``Cast`` / ``Mul`` (the integer path's rescaling)."""
        frontier = [node.outputs[0]]
        for _ in range(4):
            following = []
            for tensor in frontier:
                for user in self.consumers.get(tensor, ()):
                    candidates: list[str] = []
                    if user.op_type == "Add":
                        candidates = [i for i in user.inputs if i != tensor]
                    elif user.op_type in ("FastGelu", "BiasGelu"):
                        candidates = [self.input(user, 1)]
                    elif user.op_type == "SkipLayerNormalization":
                        candidates = [self.input(user, 4)]
                    elif user.op_type in ("Cast", "Mul"):
                        following.extend(user.outputs)
                    for c in candidates:
                        if self.is_float_init(c) and self.init[c].dims == (width,):
                            return c
            frontier = following
        return None

    # --- scopes -------------------------------------------------------------------------------
    @staticmethod
    def scope(node: Node) -> list[str]:
        """The module path segments of a node (from its name, or its first output's name)."""
        for label in (node.name, node.outputs[0] if node.outputs else ""):
            if label.startswith("/"):
                return label.strip("/").split("/")[:-1]
        return []

    def module_of(self, node: Node) -> tuple[str, bool]:
        """The deepest KModel module the node's scope reaches, and whether it reached all of it."""
        segments = self.scope(node)
        if not segments or segments[0] not in WRAPPERS:
            return "", False
        rest = segments[1:]
        best, best_depth = "", -1
        for root in ROOTS:
            path, depth, previous = root, 0, ""
            for seg in rest:
                parent = path
                if previous and seg.startswith(previous + ".") and path.endswith(previous):
                    parent = path[: len(path) - len(previous)].rstrip(".")  # Sequential: cnn.0/cnn.0.0
                found = None
                repeat = _REPEAT.fullmatch(seg)
                for candidate in (seg, repeat.group(1) if repeat else seg):
                    full = f"{parent}.{candidate}" if parent else candidate
                    if full in self.modules:
                        found = full
                        break
                if found is None:
                    break
                path, previous, depth = found, seg, depth + 1
            if depth == len(rest):
                return path, True
            if depth > best_depth and depth > 0:
                best, best_depth = path, depth
        return best, False

    def kmodel_name(self, initializer: str, names: Iterable[str]) -> str | None:
        """An initializer named by its module path in the export (``decoder.decoder.X.bias``,
        ``encoder.predictor.F0.0.conv1.bias``) -> the KModel tensor of that name, if there is one."""
        wanted = frozenset(names)
        head, _, rest = initializer.partition(".")
        if head not in WRAPPERS or not rest:
            return None
        for root in ROOTS:
            candidate = f"{root}.{rest}" if root else rest
            if candidate in wanted:
                return candidate
        return None
