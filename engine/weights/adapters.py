r"""Tensor adapters: lazy, composable renames and transforms over a TensorSource.

A family turns any supported layout (upstream checkpoints, omnivoice.cpp / VoxCPM.cpp /
audio.cpp GGUFs) into its module names with a list of ops::

    src = adapt(source, [
        Rename({"emb.weight": "embed_tokens.weight"}),       # exact names
        Rename(r"^blk\.(\d+)\.", r"layers.\1."),              # regex (re.sub)
        FoldWeightNorm(prefix="audio_vae.", dim=0),           # g/v pairs -> weight
        Split(r"(.+)\.qkv\.weight", [r"\1.q.weight", r"\1.k.weight", r"\1.v.weight"]),
        Transpose("*.embed.weight"),
        Synthesize("x.weight", lambda s: torch.ones(4)),
        Drop("*.num_batches_tracked"),
    ])

Each op maps the names of the source before it to a new set of names; nothing is read
until ``get`` (``info`` reads nothing either, except for ``Synthesize`` and ``Transform``
without a declared shape, which compute their tensor once and keep it). Name patterns:
``Drop``/``Keep``/``Transpose``/``Permute``/``Reshape``/``Cast``/``Transform`` take globs
(``fnmatch``, ``*`` crosses dots); ``Rename`` takes a mapping, a regex + replacement or a
function; ``Split``/``Fuse`` take a regex (full match) and ``re`` expansion templates.
"""

from __future__ import annotations

import fnmatch
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import torch

from ..errors import ModelError
from ..nn.layers.weight_norm import fold_weight_norm
from .blocks import BlockTensor
from .source import TensorInfo, TensorSource, cast, dtype_name, unknown_tensor

Patterns = str | Sequence[str]
_FLOAT_STORAGE = {"F32", "F16", "BF16", "F64"}


def _globs(patterns: Patterns) -> tuple[str, ...]:
    return (patterns,) if isinstance(patterns, str) else tuple(patterns)


def _matches(name: str, globs: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, g) for g in globs)


@dataclass
class Entry:
    """How a layer serves one name: a lazy info and a loader; names passed through unchanged
    also serve the stored blocks of a quantized tensor and the release hint of their source."""

    info: Callable[[], tuple[tuple[int, ...], str]]
    load: Callable[[torch.dtype | None], torch.Tensor]
    blocks: Callable[[], BlockTensor | None] | None = None
    release: Callable[[], None] | None = None


class Layer(TensorSource):
    """The result of one op: a TensorSource over ``base`` with its own name table."""

    def __init__(self, base: TensorSource, entries: dict[str, Entry]) -> None:
        self.base = base
        self.metadata, self.files, self.path = base.metadata, base.files, base.path
        self.format, self.model_spec_json, self.family = base.format, base.model_spec_json, base.family
        self._entries = entries

    def names(self) -> list[str]:
        return list(self._entries)

    def _entry(self, name: str) -> Entry:
        entry = self._entries.get(name)
        if entry is None:
            raise unknown_tensor(self, name)
        return entry

    def info(self, name: str) -> TensorInfo:
        shape, dtype = self._entry(name).info()
        return TensorInfo(name, tuple(shape), dtype)

    def get(self, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
        return self._entry(name).load(dtype)

    def blocks(self, name: str) -> BlockTensor | None:
        entry = self._entry(name)
        return entry.blocks() if entry.blocks is not None else None

    def release(self, name: str) -> None:
        entry = self._entry(name)
        if entry.release is not None:
            entry.release()

    def release_all(self) -> None:
        self.base.release_all()


def passthrough(base: TensorSource, name: str) -> Entry:
    def info() -> tuple[tuple[int, ...], str]:
        i = base.info(name)
        return i.shape, i.dtype

    return Entry(info, lambda dtype: base.get(name, dtype), lambda: base.blocks(name),
                 lambda: base.release(name))


def _computed(fn: Callable[[], torch.Tensor], shape: Sequence[int] | None = None) -> Entry:
    """An entry whose tensor is computed once on first use (info or get) and kept."""
    box: list[torch.Tensor] = []

    def value() -> torch.Tensor:
        if not box:
            tensor = fn()
            if not isinstance(tensor, torch.Tensor):
                raise TypeError(f"an adapter function returned {type(tensor).__name__}, not a tensor")
            box.append(tensor)
        return box[0]

    def info() -> tuple[tuple[int, ...], str]:
        if shape is not None and not box:
            return tuple(shape), "F32"
        t = value()
        return tuple(t.shape), dtype_name(t.dtype)

    return Entry(info, lambda dtype: cast(value(), dtype))


class TensorOp(ABC):
    """One adapter step: ``apply(source)`` returns a lazy TensorSource."""

    @abstractmethod
    def apply(self, source: TensorSource) -> TensorSource: ...


class _PerTensor(TensorOp):
    """Base for ops that transform each tensor matching ``patterns`` independently."""

    def __init__(self, patterns: Patterns) -> None:
        self.patterns = _globs(patterns)

    @abstractmethod
    def _entry(self, base: TensorSource, name: str) -> Entry: ...

    def apply(self, source: TensorSource) -> TensorSource:
        return Layer(source, {
            n: self._entry(source, n) if _matches(n, self.patterns) else passthrough(source, n)
            for n in source.names()
        })


class Rename(TensorOp):
    """Rename tensors: ``Rename({"old": "new"})`` (exact names; others kept),
    ``Rename(r"^model\\.", "")`` (``re.sub`` on every name) or ``Rename(fn)``.
    Two names ending up equal is a ModelError."""

    def __init__(self, rule: Mapping[str, str] | str | Callable[[str], str],
                 replacement: str | None = None) -> None:
        if isinstance(rule, str):
            if replacement is None:
                raise TypeError("Rename(pattern, replacement): the replacement is missing")
            regex = re.compile(rule)
            self._fn: Callable[[str], str] = lambda n: regex.sub(replacement, n)
        elif isinstance(rule, Mapping):
            table = dict(rule)
            self._fn = lambda n: table.get(n, n)
        else:
            self._fn = rule

    def apply(self, source: TensorSource) -> TensorSource:
        entries: dict[str, Entry] = {}
        origin: dict[str, str] = {}
        for name in source.names():
            new = self._fn(name)
            if new in entries:
                raise ModelError(f"renaming {source.describe()}: {origin[new]!r} and {name!r} both become "
                                 f"{new!r}",
                                 hint="the family's tensor adapters do not fit these weights")
            entries[new], origin[new] = passthrough(source, name), name
        return Layer(source, entries)


class Drop(TensorOp):
    """Remove tensors matching any of the globs (``Drop("*.num_batches_tracked")``)."""

    def __init__(self, *patterns: str) -> None:
        self.patterns = patterns

    def apply(self, source: TensorSource) -> TensorSource:
        return Layer(source, {n: passthrough(source, n) for n in source.names()
                              if not _matches(n, self.patterns)})


class Keep(TensorOp):
    """Keep only the tensors matching any of the globs."""

    def __init__(self, *patterns: str) -> None:
        self.patterns = patterns

    def apply(self, source: TensorSource) -> TensorSource:
        return Layer(source, {n: passthrough(source, n) for n in source.names()
                              if _matches(n, self.patterns)})


class Cast(_PerTensor):
    """Serve matching tensors as ``dtype`` (storage name follows); ``get(dtype=...)`` still wins."""

    def __init__(self, patterns: Patterns, dtype: torch.dtype) -> None:
        super().__init__(patterns)
        self.dtype = dtype

    def _entry(self, base: TensorSource, name: str) -> Entry:
        return Entry(lambda: (base.info(name).shape, dtype_name(self.dtype)),
                     lambda dtype: cast(base.get(name, self.dtype), dtype))


class Permute(_PerTensor):
    """Permute the dims of matching tensors (``Permute("*.conv.weight", (2, 1, 0))``)."""

    def __init__(self, patterns: Patterns, dims: Sequence[int]) -> None:
        super().__init__(patterns)
        self.dims = tuple(dims)

    def _entry(self, base: TensorSource, name: str) -> Entry:
        def info() -> tuple[tuple[int, ...], str]:
            i = base.info(name)
            if len(i.shape) != len(self.dims):
                raise ModelError(f"cannot permute {name!r} of shape {i.shape} by {self.dims}")
            return tuple(i.shape[d] for d in self.dims), i.dtype

        return Entry(info, lambda dtype: base.get(name, dtype).permute(self.dims).contiguous())


class Transpose(_PerTensor):
    """Swap two dims of matching tensors (default the first two: a 2-D transpose)."""

    def __init__(self, patterns: Patterns, dim0: int = 0, dim1: int = 1) -> None:
        super().__init__(patterns)
        self.dim0, self.dim1 = dim0, dim1

    def _entry(self, base: TensorSource, name: str) -> Entry:
        def info() -> tuple[tuple[int, ...], str]:
            i = base.info(name)
            shape = list(i.shape)
            try:
                shape[self.dim0], shape[self.dim1] = shape[self.dim1], shape[self.dim0]
            except IndexError:
                raise ModelError(
                    f"cannot transpose dims {self.dim0},{self.dim1} of {name!r} {i.shape}") from None
            return tuple(shape), i.dtype

        return Entry(info, lambda dtype: base.get(name, dtype).transpose(self.dim0, self.dim1).contiguous())


class Reshape(_PerTensor):
    """Reshape matching tensors to ``shape`` (may hold one -1) or ``shape(old_shape)``."""

    def __init__(self, patterns: Patterns,
                 shape: Sequence[int] | Callable[[tuple[int, ...]], Sequence[int]]) -> None:
        super().__init__(patterns)
        self.shape = shape

    def _entry(self, base: TensorSource, name: str) -> Entry:
        def target() -> tuple[int, ...]:
            old = base.info(name).shape
            new = tuple(self.shape(old) if callable(self.shape) else self.shape)
            try:
                return tuple(torch.empty(old, device="meta").reshape(new).shape)
            except RuntimeError:
                raise ModelError(f"cannot reshape {name!r} of shape {old} to {new}") from None

        return Entry(lambda: (target(), base.info(name).dtype),
                     lambda dtype: base.get(name, dtype).reshape(target()))


class Transform(_PerTensor):
    """Apply ``fn(tensor) -> tensor`` to matching tensors. Give ``shape(old_shape)`` to keep
    ``info`` lazy; without it the result's shape is learnt by computing it once."""

    def __init__(self, patterns: Patterns, fn: Callable[[torch.Tensor], torch.Tensor],
                 shape: Callable[[tuple[int, ...]], Sequence[int]] | None = None) -> None:
        super().__init__(patterns)
        self.fn, self.shape = fn, shape

    def _entry(self, base: TensorSource, name: str) -> Entry:
        if self.shape is None:
            return _computed(lambda: self.fn(base.get(name)))
        return Entry(lambda: (tuple(self.shape(base.info(name).shape)), base.info(name).dtype),
                     lambda dtype: cast(self.fn(base.get(name)), dtype))


class FoldWeightNorm(TensorOp):
    """Fold weight-norm pairs into plain weights: ``w = g * v / ||v||``.

    Recognizes ``<x>_g`` + ``<x>_v`` -> ``<x>`` (``torch.nn.utils.weight_norm``) and
    ``<m>.parametrizations.<x>.original0`` (g) + ``.original1`` (v) -> ``<m>.<x>``
    (``torch.nn.utils.parametrizations.weight_norm``), for names starting with ``prefix``.
    ``dim`` is the weight-norm dim (``0`` for Linear/Conv1d, also what upstream uses for
    ConvTranspose1d unless it says otherwise); ``None`` infers it from ``g``'s shape (the
    one axis longer than 1). Computed in float32; the result keeps ``v``'s float dtype
    (quantized ``v`` gives float32). An unpaired ``g`` or ``v`` is left as it is.
    """

    _PARAM = re.compile(r"^(?P<stem>.*)\.parametrizations\.(?P<param>[^.]+)\.original(?P<which>[01])$")
    _SUFFIX = re.compile(r"^(?P<stem>.+)_(?P<which>[gv])$")

    def __init__(self, prefix: str = "", dim: int | None = 0) -> None:
        self.prefix, self.dim = prefix, dim

    def _split(self, name: str) -> tuple[str, str] | None:
        if not name.startswith(self.prefix):
            return None
        m = self._PARAM.match(name)
        if m:
            return f"{m['stem']}.{m['param']}", "g" if m["which"] == "0" else "v"
        m = self._SUFFIX.match(name)
        if m:
            return m["stem"], m["which"]
        return None

    def apply(self, source: TensorSource) -> TensorSource:
        pairs: dict[str, dict[str, str]] = {}
        for name in source.names():
            key = self._split(name)
            if key:
                pairs.setdefault(key[0], {})[key[1]] = name
        folded = {target: p for target, p in pairs.items() if len(p) == 2}
        consumed = {n for p in folded.values() for n in p.values()}
        entries: dict[str, Entry] = {}
        for name in source.names():
            key = self._split(name)
            if name in consumed and key is not None:
                target = key[0]
                if target not in entries:
                    entries[target] = self._fold(source, target, folded[target]["g"], folded[target]["v"])
            else:
                entries[name] = passthrough(source, name)
        return Layer(source, entries)

    def _fold(self, source: TensorSource, target: str, g_name: str, v_name: str) -> Entry:
        def info() -> tuple[tuple[int, ...], str]:
            v = source.info(v_name)
            return v.shape, v.dtype if v.dtype in _FLOAT_STORAGE else "F32"

        def load(dtype: torch.dtype | None) -> torch.Tensor:
            g, v = source.get(g_name), source.get(v_name)
            dim = self.dim if self.dim is not None else _infer_dim(g, v, target)
            w = fold_weight_norm(v.to(torch.float32), g.to(torch.float32), dim)
            out = dtype or (v.dtype if v.is_floating_point() else torch.float32)
            return w.to(out)

        return Entry(info, load)


def _infer_dim(g: torch.Tensor, v: torch.Tensor, name: str) -> int:
    long_axes = [i for i, s in enumerate(g.shape) if s != 1]
    if not long_axes:
        return -1 if g.numel() == 1 and v.numel() > 1 and v.shape[0] != 1 else 0
    if len(long_axes) == 1 and g.dim() == v.dim() and g.shape[long_axes[0]] == v.shape[long_axes[0]]:
        return long_axes[0]
    raise ModelError(f"cannot infer the weight-norm dim of {name!r} (g {tuple(g.shape)}, v {tuple(v.shape)})",
                     hint="pass dim= to FoldWeightNorm")


class Split(TensorOp):
    """Split each tensor whose name fully matches ``pattern`` (regex) along ``dim`` into
    the names ``into`` (``re`` templates: ``\\1``...). ``sizes`` defaults to equal parts.
    The fused tensor is removed. ``Split(r"(.+)\\.qkv\\.weight", [r"\\1.q.weight", ...])``."""

    def __init__(self, pattern: str, into: Sequence[str], dim: int = 0,
                 sizes: Sequence[int] | None = None) -> None:
        self.regex, self.into, self.dim = re.compile(pattern), tuple(into), dim
        self.sizes = tuple(sizes) if sizes is not None else None

    def _sizes(self, name: str, shape: tuple[int, ...]) -> tuple[int, ...]:
        total = shape[self.dim]
        if self.sizes is None:
            if total % len(self.into):
                raise ModelError(f"cannot split {name!r} {shape} into {len(self.into)} equal parts "
                                 f"on dim {self.dim}")
            return (total // len(self.into),) * len(self.into)
        if sum(self.sizes) != total or len(self.sizes) != len(self.into):
            raise ModelError(f"cannot split {name!r} {shape} on dim {self.dim} into sizes {self.sizes}")
        return self.sizes

    def apply(self, source: TensorSource) -> TensorSource:
        entries: dict[str, Entry] = {}
        # One slot for the whole op: the last fused tensor read, so loading q, k, v in turn
        # reads it once, and at most one fused tensor is ever held.
        slot: dict[tuple[str, torch.dtype | None], torch.Tensor] = {}
        for name in source.names():
            m = self.regex.fullmatch(name)
            if not m:
                entries[name] = passthrough(source, name)
                continue

            def load_all(dtype: torch.dtype | None, name: str = name) -> tuple[torch.Tensor, ...]:
                if (name, dtype) not in slot:
                    slot.clear()
                    slot[(name, dtype)] = source.get(name, dtype)
                full = slot[(name, dtype)]
                return full.split(list(self._sizes(name, tuple(full.shape))), dim=self.dim)

            for i, template in enumerate(self.into):
                def info(i: int = i, name: str = name) -> tuple[tuple[int, ...], str]:
                    base = source.info(name)
                    shape = list(base.shape)
                    shape[self.dim] = self._sizes(name, base.shape)[i]
                    return tuple(shape), base.dtype

                entries[m.expand(template)] = Entry(
                    info, lambda dtype, i=i, load_all=load_all: load_all(dtype)[i].contiguous())
        return Layer(source, entries)


class Fuse(TensorOp):
    """Concatenate tensors along ``dim`` into one. ``parts[0]`` is a regex (full match);
    the other parts and ``into`` are its ``re`` templates:
    ``Fuse([r"(.+)\\.q\\.weight", r"\\1.k.weight", r"\\1.v.weight"], into=r"\\1.qkv.weight")``.
    The parts are removed; a missing part is a ModelError."""

    def __init__(self, parts: Sequence[str], into: str, dim: int = 0) -> None:
        self.first, self.rest, self.into, self.dim = re.compile(parts[0]), tuple(parts[1:]), into, dim

    def apply(self, source: TensorSource) -> TensorSource:
        groups: dict[str, tuple[str, ...]] = {}
        for name in source.names():
            m = self.first.fullmatch(name)
            if m:
                group = (name, *(m.expand(t) for t in self.rest))
                missing = [p for p in group if p not in source]
                if missing:
                    raise ModelError(f"cannot fuse into {m.expand(self.into)!r}: {', '.join(missing)} "
                                     f"missing from {source.describe()}")
                groups[m.expand(self.into)] = group
        consumed = {p: target for target, group in groups.items() for p in group}
        entries: dict[str, Entry] = {}
        for name in source.names():
            target = consumed.get(name)
            if target is None:
                entries[name] = passthrough(source, name)
            elif target not in entries:
                entries[target] = self._fused(source, groups[target])
        return Layer(source, entries)

    def _fused(self, source: TensorSource, group: tuple[str, ...]) -> Entry:
        def info() -> tuple[tuple[int, ...], str]:
            infos = [source.info(p) for p in group]
            shape = list(infos[0].shape)
            shape[self.dim] = sum(i.shape[self.dim] for i in infos)
            dtypes = {i.dtype for i in infos}
            return tuple(shape), dtypes.pop() if len(dtypes) == 1 else "F32"

        def load(dtype: torch.dtype | None) -> torch.Tensor:
            parts = [source.get(p, dtype) for p in group]
            if dtype is None and len({p.dtype for p in parts}) > 1:
                parts = [p.to(torch.float32) for p in parts]
            return torch.cat(parts, dim=self.dim)

        return Entry(info, load)


class Synthesize(TensorOp):
    """Add (or replace) tensor ``name`` computed by ``fn(source)`` from the source before
    this op (or a constant tensor). ``if_missing=True`` adds it only when absent. Pass
    ``shape`` to keep ``info`` from computing it. Helpers: ``zeros``, ``ones``, ``identity``,
    ``full``: ``Synthesize("x.weight", ones(4))``."""

    def __init__(self, name: str, fn: Callable[[TensorSource], torch.Tensor] | torch.Tensor, *,
                 if_missing: bool = False, shape: Sequence[int] | None = None) -> None:
        self.name, self.fn, self.if_missing, self.shape = name, fn, if_missing, shape

    def apply(self, source: TensorSource) -> TensorSource:
        entries = {n: passthrough(source, n) for n in source.names()}
        if self.if_missing and self.name in entries:
            return Layer(source, entries)
        fn = self.fn
        entries[self.name] = _computed(lambda: fn if isinstance(fn, torch.Tensor) else fn(source), self.shape)
        return Layer(source, entries)


class Defaults(TensorOp):
    """Add every tensor of ``tensors`` (name -> constant) that the source lacks, in one layer (the many
    ``Synthesize(..., if_missing=True)`` it replaces would each copy the whole name table)."""

    def __init__(self, tensors: Mapping[str, torch.Tensor]) -> None:
        self.tensors = dict(tensors)

    def apply(self, source: TensorSource) -> TensorSource:
        entries = {n: passthrough(source, n) for n in source.names()}
        for name, value in self.tensors.items():
            if name not in entries:
                entries[name] = _computed(lambda value=value: value, tuple(value.shape))
        return Layer(source, entries)


def zeros(*shape: int, dtype: torch.dtype = torch.float32) -> Callable[[TensorSource], torch.Tensor]:
    return lambda _src: torch.zeros(shape, dtype=dtype)


def ones(*shape: int, dtype: torch.dtype = torch.float32) -> Callable[[TensorSource], torch.Tensor]:
    return lambda _src: torch.ones(shape, dtype=dtype)


def full(shape: Sequence[int], value: float,
         dtype: torch.dtype = torch.float32) -> Callable[[TensorSource], torch.Tensor]:
    return lambda _src: torch.full(tuple(shape), value, dtype=dtype)


def identity(n: int, dtype: torch.dtype = torch.float32) -> Callable[[TensorSource], torch.Tensor]:
    return lambda _src: torch.eye(n, dtype=dtype)


class AdaptedSource(TensorSource):
    """``base`` seen through ``ops`` applied in order; itself a TensorSource."""

    format = "adapted"

    def __init__(self, base: TensorSource, ops: Iterable[TensorOp]) -> None:
        self.base = base
        self.ops = tuple(ops)
        current = base
        for op in self.ops:
            current = op.apply(current)
        self._final = current
        self.metadata, self.files, self.path = base.metadata, base.files, base.path
        self.format, self.model_spec_json, self.family = base.format, base.model_spec_json, base.family

    def names(self) -> list[str]:
        return self._final.names()

    def info(self, name: str) -> TensorInfo:
        return self._final.info(name)

    def get(self, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
        return self._final.get(name, dtype)

    def blocks(self, name: str) -> BlockTensor | None:
        return self._final.blocks(name)

    def release(self, name: str) -> None:
        self._final.release(name)

    def release_all(self) -> None:
        self._final.release_all()


def adapt(source: TensorSource, ops: Iterable[TensorOp]) -> AdaptedSource:
    """``AdaptedSource(source, ops)``."""
    return AdaptedSource(source, ops)
