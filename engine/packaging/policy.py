"""The quantization policy: which storage type each tensor of a package gets.

Every tensor first gets a *requested* type: ``--type``, replaced by the last matching rule
of the spec's ``quantization.keep_types``, replaced by the last matching ``--keep-type``
rule (globs match the logical name ``ns/name``). The requested type is then applied where
the tensor's kind allows it:

- integer (and bool) tensors keep an integer type;
- scalars and 1-D float tensors (norms, biases, scales) are stored as F32;
- a block type (Q8_0, Q4_0) goes only to 2-D float ``*.weight`` tensors whose row length
  (last PyTorch dim) is a multiple of the block size and that are not lookup tables
  (the spec's ``quantization.lookup_tables`` globs: embeddings, codebooks); every other
  float tensor of a block-quantized request is stored as F16;
- a float type (F32, F16, BF16) goes to every float tensor of rank 2 or more
  (conv kernels included; they are never block-quantized).
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from ..errors import UsageError

if TYPE_CHECKING:
    from ..spec.model_spec import ModelSpec

T = GGMLQuantizationType

#: The types `audiocpp package --type` writes, by CLI name.
WRITE_TYPES: dict[str, GGMLQuantizationType] = {
    "f32": T.F32, "f16": T.F16, "bf16": T.BF16, "q8_0": T.Q8_0, "q4_0": T.Q4_0,
}
FLOAT_TYPES = frozenset({T.F32, T.F16, T.BF16})
K_QUANTS = ("q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "q8_k", "q4_k_m", "q4_k_s", "q5_k_m", "q5_k_s", "q3_k_m")

# Source dtypes as TensorInfo.dtype names them (ggml names for GGUF; safetensors / torch
# names for the others), lower-cased.
_FLOAT_DTYPES = frozenset({"f64", "f32", "f16", "bf16", "float64", "float32", "float16", "bfloat16",
                           "double", "float", "half", "f8_e4m3", "f8_e5m2", "float8_e4m3fn", "float8_e5m2"})
# Integer source dtype -> the ggml integer type that holds it losslessly.
_INT_STORAGE: dict[str, GGMLQuantizationType] = {
    "bool": T.I8, "i8": T.I8, "int8": T.I8, "u8": T.I16, "uint8": T.I16,
    "i16": T.I16, "int16": T.I16, "u16": T.I32, "uint16": T.I32,
    "i32": T.I32, "int32": T.I32, "u32": T.I64, "uint32": T.I64,
    "i64": T.I64, "int64": T.I64, "u64": T.I64, "uint64": T.I64,
}
_BLOCK_NAMES = frozenset(t.name.lower() for t in T if GGML_QUANT_SIZES[t][0] > 1)


def type_name(ggml_type: GGMLQuantizationType) -> str:
    return ggml_type.name.lower()


def parse_weight_type(text: str, *, what: str = "--type") -> GGMLQuantizationType:
    key = text.strip().lower()
    if key in WRITE_TYPES:
        return WRITE_TYPES[key]
    supported = ", ".join(WRITE_TYPES)
    if key in K_QUANTS or key.startswith(("iq", "tq")):
        raise UsageError(
            f"{what} {text!r} cannot be written: gguf-py has no quantizer for K-quants or IQ/TQ types",
            hint=f"write one of {supported}; K-quant GGUFs made by llama.cpp tools are read, not written",
        )
    raise UsageError(f"unknown {what} {text!r}", hint=f"use one of {supported}")


def block_size(ggml_type: GGMLQuantizationType) -> int:
    return GGML_QUANT_SIZES[ggml_type][0]


def source_kind(dtype: str) -> str:
    """'float', 'int' or 'unknown' for a TensorInfo dtype name (ggml, safetensors or torch)."""
    key = dtype.lower().removeprefix("torch.")
    if key in _FLOAT_DTYPES or key in _BLOCK_NAMES:
        return "float"
    if key in _INT_STORAGE:
        return "int"
    return "unknown"


def integer_storage(dtype: str) -> GGMLQuantizationType:
    return _INT_STORAGE[dtype.lower().removeprefix("torch.")]


@dataclass(frozen=True)
class KeepRule:
    """``pattern=type``: tensors whose logical name matches get ``type`` requested."""

    pattern: str
    type: GGMLQuantizationType
    origin: str  # "spec" or "--keep-type"

    def describe(self) -> str:
        return f"{self.origin} {self.pattern}={type_name(self.type)}"


def parse_keep_type(text: str) -> KeepRule:
    pattern, sep, type_text = text.rpartition("=")
    pattern, type_text = pattern.strip(), type_text.strip()
    if not sep or not pattern or not type_text:
        raise UsageError(
            f"--keep-type {text!r} is not 'pattern=type'",
            hint="e.g. --keep-type 'audio_tokenizer_weights/*=f32' (the pattern is a glob over ns/name)",
        )
    return KeepRule(pattern, parse_weight_type(type_text, what="--keep-type type"), "--keep-type")


@dataclass(frozen=True)
class Decision:
    """Where one tensor goes and why."""

    name: str  # logical name ns/name
    shape: tuple[int, ...]  # PyTorch order
    source_dtype: str
    ggml_type: GGMLQuantizationType
    reason: str
    rule: KeepRule | None = None  # the keep-type rule that set the requested type


class QuantizationPolicy:
    def __init__(self, weight_type: GGMLQuantizationType, *, lookup_tables: tuple[str, ...] = (),
                 spec_rules: tuple[KeepRule, ...] = (), cli_rules: tuple[KeepRule, ...] = ()) -> None:
        self.weight_type = weight_type
        self.lookup_tables = tuple(lookup_tables)
        self.rules = tuple(spec_rules) + tuple(cli_rules)
        self.cli_rules = tuple(cli_rules)

    @classmethod
    def from_spec(cls, spec: ModelSpec | None, weight_type: GGMLQuantizationType,
                  cli_rules: tuple[KeepRule, ...] = ()) -> QuantizationPolicy:
        if spec is None:
            return cls(weight_type, cli_rules=cli_rules)
        quant = spec.quantization
        spec_rules = tuple(KeepRule(k.pattern, parse_weight_type(k.type, what="spec keep_types type"), "spec")
                           for k in quant.keep_types)
        return cls(weight_type, lookup_tables=tuple(quant.lookup_tables), spec_rules=spec_rules,
                   cli_rules=cli_rules)

    def requested(self, name: str) -> tuple[GGMLQuantizationType, KeepRule | None]:
        chosen: KeepRule | None = None
        for rule in self.rules:  # later rules win: spec first, then the command line
            if fnmatchcase(name, rule.pattern):
                chosen = rule
        return (chosen.type if chosen else self.weight_type), chosen

    def is_lookup_table(self, name: str) -> bool:
        return any(fnmatchcase(name, pattern) for pattern in self.lookup_tables)

    def decide(self, name: str, shape: tuple[int, ...], source_dtype: str) -> Decision:
        kind = source_kind(source_dtype)
        if kind == "unknown":
            raise UsageError(f"tensor {name!r} has dtype {source_dtype!r}, which a package cannot store",
                             hint="convert it to a float or integer dtype first")
        requested, rule = self.requested(name)

        def out(ggml_type: GGMLQuantizationType, reason: str) -> Decision:
            return Decision(name, tuple(shape), source_dtype, ggml_type, reason, rule)

        if kind == "int":
            return out(integer_storage(source_dtype), "integer tensor keeps an integer type")
        numel = 1
        for d in shape:
            numel *= d
        if len(shape) <= 1 or numel == 0:
            return out(T.F32, "scalar/1-D float stays F32" if numel else "empty tensor stored as F32")
        fallback = requested if requested in FLOAT_TYPES else T.F16
        if self.is_lookup_table(name):
            return out(fallback, "lookup table (never block-quantized)")
        if len(shape) >= 3:
            return out(fallback, f"rank-{len(shape)} tensor (conv kernel; never block-quantized)")
        if requested in FLOAT_TYPES:
            return out(requested, "2-D float")
        if not name.endswith(".weight"):
            return out(fallback, "2-D tensor not named *.weight (not block-quantized)")
        block = block_size(requested)
        if shape[-1] % block:
            return out(fallback, f"row length {shape[-1]} is not a multiple of {block}")
        return out(requested, "2-D weight, block-quantized")

    def unused_cli_rules(self, names: list[str]) -> list[KeepRule]:
        return [r for r in self.cli_rules if not any(fnmatchcase(n, r.pattern) for n in names)]
