"""Reading a checkpoint's config.json, which comes from strangers: strict value conversions and a
check of the parsed config dataclasses, so that a wrong type or an impossible size is one
ModelError naming the field, never a traceback from deep inside model building.

Families parse inside ``config_errors(where)`` with ``as_int`` / ``as_float`` / ``as_bool`` (Python's
``int(1.5)`` is 1 and ``bool("false")`` is True: both would pass silently) and run
``check_config`` on the result.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from .errors import ModelError

MALFORMED = "the config.json of the checkpoint is malformed"


def as_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or int(value) != value:
        raise TypeError(f"expected an integer, got {value!r}")
    return int(value)


def as_float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value)


def as_bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {value!r}")
    return value


def as_ints(values: Any) -> tuple[int, ...]:
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"expected a list of integers, got {values!r}")
    return tuple(as_int(v) for v in values)


def as_floats(values: Any) -> tuple[float, ...]:
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"expected a list of numbers, got {values!r}")
    return tuple(as_float(v) for v in values)


@contextmanager
def config_errors(where: str) -> Iterator[None]:
    """A conversion that fails while parsing ``where`` becomes a ModelError naming it."""
    try:
        yield
    except (TypeError, ValueError, AttributeError, ArithmeticError) as exc:
        raise ModelError(f"{where}: {exc}", hint=MALFORMED) from None


def check_config(config: Any, where: str, *, may_be_zero: Iterable[str] = ()) -> None:
    """Check a parsed config dataclass tree: every field holds its annotated type, integers are
    positive (names in ``may_be_zero`` may be 0), floats finite. Raises one ModelError listing
    every problem by field path."""
    zero_ok = set(may_be_zero)
    problems: list[str] = []
    _walk(config, "", zero_ok, problems)
    if problems:
        raise ModelError(f"{where}: " + "; ".join(problems[:8]) + (" ..." if len(problems) > 8 else ""),
                         hint=MALFORMED)


def _walk(obj: Any, prefix: str, zero_ok: set[str], problems: list[str]) -> None:
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        name = f"{prefix}{f.name}"
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            _walk(value, f"{name}.", zero_ok, problems)
            continue
        problem = _problem(hints.get(f.name, Any), value, f.name in zero_ok or name in zero_ok)
        if problem:
            problems.append(f"{name} {problem}, got {value!r}")


def _problem(kind: Any, value: Any, zero_ok: bool) -> str | None:
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(kind)
        if value is None and type(None) in options:
            return None
        found = [_problem(k, value, zero_ok) for k in options if k is not type(None)]
        return None if any(p is None for p in found) else found[0]
    if origin is tuple:
        args = typing.get_args(kind)
        if not isinstance(value, tuple):
            return "must be a list"
        if len(args) == 2 and args[1] is Ellipsis:
            bad = [p for p in (_problem(args[0], v, zero_ok) for v in value) if p]
            return f"must be a list whose items each {bad[0].removeprefix('must ')}" if bad else None
        return None
    if kind is bool:
        return None if isinstance(value, bool) else "must be true or false"
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            return "must be an integer"
        return (None if value >= (0 if zero_ok else 1)
                else "must be non-negative" if zero_ok else "must be positive")
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return "must be a finite number"
        return None
    if kind is str:
        return None if isinstance(value, str) else "must be a string"
    return None  # Literal, Any, dicts: checked where they are used
