"""``model_specs/schema.json`` (JSON Schema 2020-12 of a spec) and what it finds wrong with a spec.

Apart from the typed model (``spec.model``, which runs it on every spec it builds) and the cross-field
rules (``spec.validate``), so that both import it and neither imports the other.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any


@cache
def schema() -> dict[str, Any]:
    text = resources.files("audiocpp.model_specs").joinpath("schema.json").read_text(encoding="utf-8")
    return json.loads(text)


@cache
def _validator():
    import jsonschema

    cls = jsonschema.validators.validator_for(schema())
    cls.check_schema(schema())
    return cls(schema(), format_checker=cls.FORMAT_CHECKER)


def schema_problems(data: Any) -> list[str]:
    """What ``schema.json`` finds wrong with ``data``, as ``"<json path>: <message>"``.

    A spec found valid is remembered on disk (an empty file named by the hash of the schema and the
    spec, under ``$AUDIOCPP_CACHE_DIR/spec-ok``): validating the four built-in specs took 0.3 s of
    every process's start-up; a changed spec or schema has another name and is validated again."""
    marker = _valid_marker(data)
    if marker is not None and marker.exists():
        return []
    errors = sorted(_validator().iter_errors(data), key=lambda e: (list(e.absolute_path), e.message))
    problems = [f"{err.json_path}: {_short(err)}" for err in errors]
    if not problems and marker is not None:
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
        except OSError:  # a read-only cache: validate every time
            pass
    return problems


def _valid_marker(data: Any) -> Path | None:
    try:
        text = json.dumps(data, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):  # not JSON data: the schema says what is wrong with it
        return None
    digest = hashlib.sha256(json.dumps(schema(), sort_keys=True).encode())
    digest.update(b"\0")
    digest.update(text.encode())
    root = os.environ.get("AUDIOCPP_CACHE_DIR")
    folder = Path(root).expanduser() if root else Path.home() / ".cache" / "audiocpp"
    return folder / "spec-ok" / digest.hexdigest()


def _short(err: Any) -> str:
    message = err.message
    if err.validator in ("oneOf", "anyOf") and err.context:
        # Prefer the branch written for this kind of value (a string ref vs an object ref).
        same_type = [e for e in err.context if e.validator != "type"]
        best = min(same_type or err.context, key=lambda e: len(e.message))
        message = best.message
    elif (err.validator == "not" and isinstance(err.validator_value, dict)
          and "required" in err.validator_value):
        message = "may not combine " + " and ".join(repr(k) for k in err.validator_value["required"])
    return message if len(message) < 300 else message[:297] + "..."


