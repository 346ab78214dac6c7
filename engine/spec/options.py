"""Option parsing against a spec: strings from the CLI or typed values from Python.

One function turns a mapping of raw options into typed values with defaults filled in;
unknown names, bad types, out-of-range numbers and disallowed values are UsageErrors that
list what the family accepts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .. import fs
from ..errors import UsageError, did_you_mean
from .model_spec import ModelSpec, OptionScope, OptionSpec

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_key_values(items: Iterable[str], *, flag: str) -> dict[str, str]:
    """``["a=1", "b=x"]`` -> ``{"a": "1", "b": "x"}``; a missing '=' is a usage error."""
    parsed: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{flag} {item!r} is not of the form key=value",
                             hint=f"write e.g. {flag} seed=7")
        parsed[key.strip()] = value
    return parsed


def parse_value(opt: OptionSpec, raw: Any, *, where: str) -> Any:
    """Convert ``raw`` (a string or a Python value) to the option's type and check its range."""
    if raw is None:
        return None
    kind = opt.type
    try:
        if kind == "bool":
            value: Any = _to_bool(raw)
        elif kind == "int":
            value = _to_int(raw)
        elif kind == "float":
            value = _to_float(raw)
        elif kind == "enum":
            value = opt.canonical(str(raw))
        elif kind == "string":
            value = str(raw)
        elif kind in ("path", "audio_path"):
            value = _to_path(raw)
        elif kind == "string_list":
            value = _to_list(raw, str)
        elif kind == "float_list":
            value = _to_list(raw, _to_float)
        elif kind in ("path_list", "audio_path_list"):
            value = _to_list(raw, _to_path)
        else:  # pragma: no cover - the schema restricts types
            raise ValueError(f"unsupported option type {kind}")
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{where}: {exc}", hint=f"{opt.name} takes {opt.describe_type()}") from None

    if kind in ("int", "float"):
        if opt.min is not None and value < opt.min:
            raise UsageError(f"{where}: {value} is below the minimum {opt.show_number(opt.min)}",
                             hint=opt.description)
        if opt.max is not None and value > opt.max:
            raise UsageError(f"{where}: {value} is above the maximum {opt.show_number(opt.max)}",
                             hint=opt.description)
    allowed = opt.allowed_values
    if kind == "enum" and allowed and value not in allowed:
        also = f" (or {', '.join(opt.aliases())})" if opt.aliases() else ""
        raise UsageError(f"{where}: {value!r} is not allowed", hint=f"use one of: {', '.join(allowed)}{also}")
    if kind in ("audio_path", "path") and not fs.exists(value):
        raise UsageError(f"{where}: file {str(value)!r} does not exist", hint="check the path")
    if kind in ("audio_path_list", "path_list"):
        for item in value:
            if not fs.exists(item):
                raise UsageError(f"{where}: file {str(item)!r} does not exist", hint="check the path")
    return value


def _to_path(raw: Any) -> Path:
    try:
        return Path(str(raw)).expanduser()
    except RuntimeError:  # "~name" of a user this system does not know
        raise ValueError(f"{str(raw)!r} starts with '~' but there is no such user's home folder") from None


def _to_bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{raw!r} is not a boolean (use true or false)")


def _to_int(raw: Any) -> int:
    if isinstance(raw, bool):
        raise ValueError(f"{raw!r} is not an integer")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float):
        if raw.is_integer():
            return int(raw)
        raise ValueError(f"{raw!r} is not an integer")
    text = str(raw).strip()
    try:
        return int(text, 10)
    except ValueError:
        raise ValueError(f"{raw!r} is not an integer") from None


def _to_float(raw: Any) -> float:
    if isinstance(raw, bool):
        raise ValueError(f"{raw!r} is not a number")
    try:
        value = float(str(raw).strip()) if isinstance(raw, str) else float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{raw!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{raw!r} is not a finite number")
    return value


def _to_list(raw: Any, convert) -> list[Any]:
    items = [s for s in (p.strip() for p in raw.split(","))] if isinstance(raw, str) else list(raw)
    return [convert(item) for item in items if item != ""]


def _local_name(spec: ModelSpec, scope: OptionScope, key: str) -> str:
    """Session and load options are addressed as ``family.name`` or plain ``name``."""
    if scope == "request":
        return key
    family, dot, local = key.partition(".")
    if not dot:
        return key
    if family != spec.family:
        raise UsageError(
            f"--{scope}-option {key!r} belongs to family {family!r}, but the model is {spec.family!r}",
            hint=f"write it as {spec.family}.{local}",
        )
    return local


def options_listing(spec: ModelSpec, scope: OptionScope) -> str:
    rows = spec.options.scope(scope)
    if not rows:
        return f"{spec.family} has no {scope} options"
    prefix = f"{spec.family}." if scope == "session" else ""  # as --session-option / --load-option take them
    return ", ".join(f"{prefix}{row.name}" for row in rows)


def resolve_options(
    spec: ModelSpec,
    scope: OptionScope,
    given: Mapping[str, Any] | None,
    *,
    fill_defaults: bool = True,
) -> dict[str, Any]:
    """Typed options of ``scope``: the given values parsed, the rest from spec defaults."""
    rows = {row.name: row for row in spec.options.scope(scope)}
    resolved: dict[str, Any] = {}
    for key, raw in (given or {}).items():
        name = _local_name(spec, scope, key)
        row = rows.get(name)
        if row is None:
            raise UsageError(
                f"{spec.family} has no {scope} option {key!r}",
                hint=f"{did_you_mean(name, rows)}{scope} options of {spec.family}: "
                f"{options_listing(spec, scope)} (see `audiocpp options --family {spec.family}`)",
            )
        resolved[name] = parse_value(row, raw, where=f"{scope} option {key}")
    if fill_defaults:
        for name, row in rows.items():
            if name not in resolved:
                if row.required:
                    raise UsageError(
                        f"{spec.family} needs the {scope} option {name!r}", hint=row.description
                    )
                default = row.default
                if default is not None and row.type in ("path", "audio_path"):
                    default = Path(default)
                resolved[name] = default
    return resolved


def format_options(spec: ModelSpec) -> str:
    """A readable table of the family's options, grouped by scope (CLI help)."""
    lines = [f"{spec.display_name} ({spec.family}) options"]
    flag = {"request": "--request-option", "session": "--session-option", "load": "--load-option"}
    for scope in ("request", "session", "load"):
        rows = spec.options.scope(scope)
        if not rows:
            continue
        lines.append("")
        lines.append(f"{scope} options "
                     f"({flag[scope]} {spec.family + '.' if scope == 'session' else ''}NAME=VALUE):")
        width = max(len(r.name) for r in rows) + 2
        for row in rows:
            default = "" if row.default is None else f" (default: {_show(row.default)})"
            lines.append(f"  {row.name.ljust(width)}{row.describe_type()}{default}")
            lines.append(f"  {' ' * width}{row.description}")
    return "\n".join(lines)


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
