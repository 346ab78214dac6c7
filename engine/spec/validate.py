"""Spec validation: JSON Schema first, then the cross-field rules a schema cannot say.

Every problem is reported with its JSON path (``$.options.request[2].default``) so the
author can find it.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import SpecError
from .canonical import option_name_problems
from .model_spec import PRESETS, ModelSpec
from .schema import schema, schema_problems  # noqa: F401 - schema: re-exported

NUMERIC = ("int", "float")


def spec_problems(data: Any, *, expected_family: str | None = None) -> list[str]:
    """Return every problem of ``data`` as ``"<json path>: <message>"`` (empty when valid):
    the schema's, then the cross-field rules a schema cannot say."""
    problems = schema_problems(data)
    if problems or not isinstance(data, dict):
        return problems
    return _semantic_problems(data, expected_family)


def _semantic_problems(data: dict[str, Any], expected_family: str | None) -> list[str]:
    problems: list[str] = []
    family = data["family"]
    if expected_family is not None and family != expected_family:
        problems.append(f"$.family: {family!r} must equal the file name stem {expected_family!r}")

    tasks = set(data["tasks"])
    for task in data.get("capabilities", {}):
        if task not in tasks:
            problems.append(f"$.capabilities.{task}: task {task!r} is not listed in $.tasks")

    declared: dict[str, set[str]] = {}
    for scope, rows in data["options"].items():
        seen: set[str] = set()
        for i, row in enumerate(rows):
            path = f"$.options.{scope}[{i}]"
            name = row["name"]
            if name in seen:
                problems.append(f"{path}.name: duplicate option {name!r} in scope {scope!r}")
            seen.add(name)
            for where, message in option_name_problems(family, scope, name, row["type"]):
                problems.append(f"{path}.{where}: {message}")
            problems.extend(_default_problems(row, path))
        declared[scope] = seen

    for i, dep in enumerate(data.get("dependencies", [])):
        if dep["option"] not in declared.get(dep["scope"], set()):
            problems.append(
                f"$.dependencies[{i}].option: {dep['option']!r} is not declared in $.options.{dep['scope']}"
            )

    package_ids = [p["id"] for p in data.get("packages", [])]
    for i, pid in enumerate(package_ids):
        if package_ids.index(pid) != i:
            problems.append(f"$.packages[{i}].id: duplicate package id {pid!r}")
    recommended = data.get("ui", {}).get("recommended_package")
    if recommended is not None and recommended not in package_ids:
        problems.append(f"$.ui.recommended_package: {recommended!r} is not the id of a package in $.packages")

    for i, src in enumerate(data["sources"]):
        roots = set(src["roots"])
        for group in ("files", "optional_files", "tensors", "optional_tensors"):
            for key, ref in src.get(group, {}).items():
                ref_text = ref["source"] if isinstance(ref, dict) else ref
                root = ref_text.split(":", 1)[0]
                if root not in roots:
                    problems.append(
                        f"$.sources[{i}].{group}.{key}: root {root!r} is not declared in $.sources[{i}].roots"
                    )
    return problems


def _default_problems(row: dict[str, Any], path: str) -> list[str]:
    problems: list[str] = []
    lo, hi = row.get("min"), row.get("max")
    if lo is not None and hi is not None and lo > hi:
        problems.append(f"{path}.min: min {lo} is greater than max {hi}")
    if "default" not in row or row["default"] is None:
        return problems
    default = row["default"]
    kind = row["type"]
    if kind in NUMERIC:
        if isinstance(default, bool) or not isinstance(default, (int, float)):
            return problems  # the schema already reported the type
        if lo is not None and default < lo:
            problems.append(f"{path}.default: {default} is below min {lo}")
        if hi is not None and default > hi:
            problems.append(f"{path}.default: {default} is above max {hi}")
    elif kind == "enum":
        allowed = row.get("values") or PRESETS.get(row.get("preset", ""), ())
        if default not in allowed:
            problems.append(f"{path}.default: {default!r} is not one of {list(allowed)}")
    elif kind in ("string", "path", "audio_path") and not isinstance(default, str):
        problems.append(f"{path}.default: must be a string")
    elif kind.endswith("_list") and not isinstance(default, list):
        problems.append(f"{path}.default: must be a list")
    return problems


def validate_spec(data: Any, *, origin: str = "<spec>", expected_family: str | None = None) -> ModelSpec:
    """Validate ``data`` and return the typed spec, or raise SpecError listing every problem."""
    problems = spec_problems(data, expected_family=expected_family)
    if problems:
        listing = "\n  ".join(problems)
        raise SpecError(
            f"model spec {origin} is invalid:\n  {listing}",
            hint="fix the fields at the JSON paths above; the format is described in docs/spec-format.md",
        )
    spec = ModelSpec.model_validate(data, context={"schema_checked": True})
    spec._origin = origin
    return spec


#: a spec is a few kilobytes; anything far larger is not one (and is refused before parsing)
MAX_SPEC_BYTES = 4 << 20
#: JSON nesting deeper than this is refused (a spec nests five levels; Python's parser recurses)
MAX_SPEC_DEPTH = 64


def load_spec_file(path: str | Path, *, check_name: bool = True) -> ModelSpec:
    path = Path(path)
    try:
        if path.stat().st_size > MAX_SPEC_BYTES:
            raise SpecError(f"model spec {path} is larger than {MAX_SPEC_BYTES >> 20} MiB; it is not a spec")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"model spec {path} does not exist") from None
    except UnicodeDecodeError:
        raise SpecError(f"model spec {path} is not UTF-8 text") from None
    except OSError as exc:
        raise SpecError(f"model spec {path} cannot be read: {exc.strerror or exc}") from None
    data = _parse(text, str(path))
    return validate_spec(data, origin=str(path), expected_family=path.stem if check_name else None)


def load_spec_text(text: str, *, origin: str) -> ModelSpec:
    if len(text) > MAX_SPEC_BYTES:
        raise SpecError(f"model spec {origin} is larger than {MAX_SPEC_BYTES >> 20} MiB; it is not a spec")
    return validate_spec(_parse(text, origin), origin=origin)


def _parse(text: str, origin: str) -> Any:
    """``json.loads`` with every failure as a SpecError (bad JSON, numbers of more digits than
    Python converts, nesting deep enough to exhaust a recursive parser or validator)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(f"model spec {origin} is not valid JSON: line {exc.lineno} column {exc.colno}: "
                        f"{exc.msg}") from None
    except (ValueError, RecursionError) as exc:
        raise SpecError(f"model spec {origin} is not valid JSON: {str(exc)[:200]}") from None
    if _depth(data) > MAX_SPEC_DEPTH:
        raise SpecError(f"model spec {origin} nests JSON deeper than {MAX_SPEC_DEPTH} levels; it is not "
                        "a spec")
    return data


def _depth(data: Any) -> int:
    """The nesting depth of parsed JSON (iteratively: no recursion to exhaust)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            node = list(node.values())
        if isinstance(node, list):
            deepest = max(deepest, depth)
            if depth <= MAX_SPEC_DEPTH:
                stack.extend((child, depth + 1) for child in node)
    return deepest


def builtin_spec_path(family: str) -> Path:
    """Path of a spec shipped in ``audiocpp.model_specs``."""
    return Path(str(resources.files("audiocpp.model_specs").joinpath(f"{family}.json")))
