"""``model_specs/schema.json`` (JSON Schema 2020-12 of a spec) and what it finds wrong with a spec.

Apart from the typed model (``spec.model``, which runs it on every spec it builds) and the cross-field
rules (``spec.validate``), so that both import it and neither imports the other.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
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
    """What ``schema.json`` finds wrong with ``data``, as ``"<json path>: <message>"``."""
    errors = sorted(_validator().iter_errors(data), key=lambda e: (list(e.absolute_path), e.message))
    return [f"{err.json_path}: {_short(err)}" for err in errors]


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


