"""Reading a checkpoint's config (``config.json``, or GGUF metadata mapped to the same shape) one way
for every family: a frozen dataclass per config section, read by its field types.

A checkpoint's config comes from strangers, so a value of the wrong type or an impossible size is one
ModelError naming the file and the field (with its upstream key where that differs), never a
traceback from deep inside model building, and never a silent conversion (Python's ``int(1.5)`` is 1
and ``bool("false")`` is True).

A section is ``@dataclass(frozen=True) class X(ConfigSection)``; ``X.from_dict(raw, where=...)`` reads
each field from the key of its name by its annotation: ``int`` (positive unless ``zero_ok``),
``float`` (finite), ``bool``, ``str``, ``Literal[...]``, ``tuple[T, ...]``, ``dict[str, T]``,
``T | None`` (null is None) and nested sections. A key that is absent or null takes the field's
default; a field without one is required. :func:`setting` declares what differs from that: the
upstream key, a default computed from the fields read before it, a section read from prefixed keys
of the same object. Two hooks hold what types cannot say: ``prepare`` (upstream's dict into the
declared shape, refusing settings this version cannot run) and ``check`` (rules across fields).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from .errors import ModelError

MALFORMED = "the config.json of the checkpoint is malformed"
_META = "audiocpp.config"
_MISSING: Any = dataclasses.MISSING
#: A dotted key path into a section's dict ("dit_config.cfm_config") and what a value there must be.
KeyPaths = dict[str, Any]
T = TypeVar("T", bound="ConfigSection")


@dataclass(frozen=True)
class _Setting:
    key: str | None = None
    derive: Callable[[dict[str, Any], Mapping[str, Any]], Any] | None = None
    zero_ok: bool = False
    prefix: str | None = None
    read: bool = True


def setting(default: Any = _MISSING, *, key: str | None = None, factory: Callable[[], Any] = _MISSING,
            derive: Callable[[dict[str, Any], Mapping[str, Any]], Any] | None = None, zero_ok: bool = False,
            prefix: str | None = None, read: bool = True, compare: bool = True, repr: bool = True,
            hash: bool | None = None) -> Any:
    """A config field that is read in a way of its own.

    ``key``: its upstream key, when not its name (a dotted path reaches into nested objects).
    ``derive(values, raw)``: its value when the key is absent or null, from the fields read before it
    (``values``) or the section's dict. ``zero_ok``: an integer (or integer item) may be 0.
    ``prefix``: a nested section read from this object's keys that start with ``prefix``.
    ``read=False``: never read; the value is ``derive``'s, else the default.
    """
    meta = {_META: _Setting(key, derive, zero_ok, prefix, read)}
    return dataclasses.field(default=default, default_factory=factory, metadata=meta, compare=compare,
                             repr=repr, hash=hash)


class ConfigSection:
    """Base of a config section: a frozen dataclass whose fields say how they are read."""

    @classmethod
    def from_dict(cls: type[T], raw: Any, *, where: str = "config.json", hint: str = MALFORMED) -> T:
        """The section read from upstream's dict; ``where`` names the file in errors."""
        if not isinstance(raw, Mapping):
            raise ModelError(f"{where} is not a JSON object", hint=hint)
        return _read_section(cls, raw, _Place(where, hint))

    @classmethod
    def prepare(cls, raw: dict[str, Any], where: str) -> dict[str, Any]:
        """Upstream's dict in the shape the fields declare; raise ModelError for settings that cannot run."""
        return raw

    def check(self, where: str) -> None:
        """Rules across fields, after every field was read and checked on its own."""


def config_error(where: str, message: str, hint: str = MALFORMED) -> ModelError:
    """The error of a config rule the hooks check (``where``: the file)."""
    return ModelError(f"{where}: {message}", hint=hint)


@dataclass(frozen=True)
class _Place:
    """Where a value sits: the file, its field path (``llm.``) and its upstream key path (``llm_config.``)."""

    where: str
    hint: str
    field: str = ""
    key: str = ""

    def error(self, name: str, key: str, text: str) -> ModelError:
        fpath, kpath = self.field + name, self.key + key
        suffix = "" if fpath == kpath else f" (key {kpath})"
        return ModelError(f"{self.where}: {fpath}{text}{suffix}", hint=self.hint)

    def inner(self, name: str, key: str, sep: str = ".") -> _Place:
        return _Place(self.where, self.hint, f"{self.field}{name}.", f"{self.key}{key}{sep}")


def _read_section(cls: type[Any], raw: Mapping[str, Any], at: _Place) -> Any:
    raw = cls.prepare(dict(raw), at.where)
    kinds = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        values[f.name] = _field_value(f, kinds[f.name], raw, values, at)
    section = cls(**values)
    section.check(at.where)
    return section


def _setting(f: dataclasses.Field) -> _Setting:
    return f.metadata.get(_META) or _Setting()


def _field_value(f: dataclasses.Field, kind: Any, raw: Mapping[str, Any], values: dict[str, Any],
                 at: _Place) -> Any:
    s = _setting(f)
    if not s.read:
        return s.derive(values, raw) if s.derive else _default(f, at, f.name)
    if s.prefix is not None:
        sub = {k[len(s.prefix):]: v for k, v in raw.items() if k.startswith(s.prefix)}
        return _read_section(kind, sub, at.inner(f.name, s.prefix, sep=""))
    key = s.key or f.name
    found, value = _lookup(raw, key)
    if found and value is None and _optional(kind):
        return None
    if value is None:
        if s.derive is not None:
            return s.derive(values, raw)
        return _default(f, at, key)
    return _convert(kind, value, at, f.name, key, s.zero_ok)


def _lookup(raw: Mapping[str, Any], key: str) -> tuple[bool, Any]:
    node: Any = raw
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _default(f: dataclasses.Field, at: _Place, key: str) -> Any:
    if f.default is not _MISSING:
        return f.default
    if f.default_factory is not _MISSING:
        return f.default_factory()
    raise at.error(f.name, key, " is missing")


def _optional(kind: Any) -> bool:
    return typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in typing.get_args(kind)


def _convert(kind: Any, value: Any, at: _Place, name: str, key: str, zero_ok: bool) -> Any:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in args if a is not type(None)]
        return _convert(inner, value, at, name, key, zero_ok)
    if origin is Literal:
        if not any(type(value) is type(a) and value == a for a in args):
            raise at.error(name, key, f" must be one of {', '.join(map(repr, args))}, got {value!r}")
        return value
    if dataclasses.is_dataclass(kind):
        if not isinstance(value, Mapping):
            raise at.error(name, key, f": expected an object, got {value!r}")
        return _read_section(kind, value, at.inner(name, key))
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise at.error(name, key, f": expected a list, got {value!r}")
        return tuple(_convert(args[0], v, at, f"{name}[{i}]", f"{key}[{i}]", zero_ok)
                     for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise at.error(name, key, f": expected an object, got {value!r}")
        return {k: _convert(args[1], v, at, f"{name}[{k!r}]", f"{key}[{k!r}]", zero_ok)
                for k, v in value.items()}
    try:
        return _scalar(kind, value, zero_ok)
    except TypeError as exc:
        raise at.error(name, key, f": {exc}") from None
    except ValueError as exc:
        raise at.error(name, key, f" {exc}") from None


def _scalar(kind: Any, value: Any, zero_ok: bool) -> Any:
    """``value`` as ``kind``: TypeError for a value of another type, ValueError for one out of range."""
    if kind is int:
        number = _number(value, "an integer")
        if not math.isfinite(number) or int(number) != number:
            raise ValueError(f"must be an integer, got {value!r}")
        if number < (0 if zero_ok else 1):
            raise ValueError(f"must be {'non-negative' if zero_ok else 'positive'}, got {value!r}")
        return int(number)
    if kind is float:
        number = float(_number(value, "a number"))
        if not math.isfinite(number):
            raise ValueError(f"must be a finite number, got {value!r}")
        return number
    if kind is bool and not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {value!r}")
    if kind is str and not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value  # a bool, a str, or Any


def _number(value: Any, what: str) -> int | float:
    """JSON's numbers only: Python's ``bool`` is an ``int``, but ``true`` is not a size."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected {what}, got {value!r}")
    return value


# -- flat metadata (GGUF) into the dict shape ------------------------------------------------------
def key_paths(cls: type[Any], prefix: str = "") -> KeyPaths:
    """Every upstream key path a section reads (nested sections expanded) with its field type, for
    mapping a flat store of the same values (GGUF metadata) back into the dict ``from_dict`` reads."""
    out: KeyPaths = {}
    kinds = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        s = _setting(f)
        if not s.read:
            continue
        kind = kinds[f.name]
        if s.prefix is not None:
            out.update(key_paths(kind, prefix + s.prefix))
            continue
        path = prefix + (s.key or f.name)
        if dataclasses.is_dataclass(kind):
            out.update(key_paths(kind, path + "."))
        else:
            out[path] = kind
    return out


def scalar_kind(kind: Any) -> Any:
    """What one value of a field type is (``int`` for ``tuple[int, ...] | None``, ``str`` for a Literal
    of strings), for converting a flat store's encoding (u32 booleans, numpy arrays) before reading."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        return scalar_kind(next(a for a in args if a is not type(None)))
    if origin is Literal:
        return type(args[0])
    if origin is tuple:
        return scalar_kind(args[0])
    return kind


def nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``{"a.b": 1, "a.c": 2}`` as ``{"a": {"b": 1, "c": 2}}``."""
    out: dict[str, Any] = {}
    for path, value in flat.items():
        *parents, leaf = path.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out
