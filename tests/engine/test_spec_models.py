"""``model_specs/schema.json`` and the pydantic models (``engine.spec.model``) accept and reject
the same specs, on one corpus: every shipped spec, the toy family's, and mutations of them
(each field deleted, nulled, given another type, emptied; an unknown key in every object).

The typed models check only types; the structure rules (enums, patterns, lengths, required
fields) are the schema's, which ``ModelSpec`` runs when it is built. So: what the schema accepts
the typed models must accept (else a valid spec would fail to load), and what it rejects
``ModelSpec`` rejects.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from audiocpp.engine.spec.model_spec import ModelSpec
from audiocpp.engine.spec.validate import schema_problems

SPEC_DIR = Path(str(resources.files("audiocpp.model_specs")))
TOY = (Path(__file__).resolve().parents[1] / "data" / "audiocpp_toyfamily" / "src" / "audiocpp_toyfamily"
       / "toytone.json")
SHIPPED = sorted(p for p in SPEC_DIR.glob("*.json") if p.name != "schema.json")

Path_ = tuple[Any, ...]


def _nodes(node: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """Every node once per shape: of a list, only its first item is walked."""
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _nodes(value, (*path, key))
    elif isinstance(node, list) and node:
        yield from _nodes(node[0], (*path, 0))


def _replacements(value: Any) -> list[tuple[str, Any]]:
    """Values of another type, or emptied, for a node holding ``value``."""
    if isinstance(value, bool):
        return [("str", "yes"), ("int", 1)]
    if isinstance(value, (int, float)):
        return [("str", "7"), ("bool", True), ("null", None)]
    if isinstance(value, str):
        return [("int", 7), ("empty", ""), ("other", "zz-not-a-value"), ("null", None)]
    if isinstance(value, list):
        return [("str", "zz"), ("empty", []), ("dict", {})]
    if isinstance(value, dict):
        return [("list", []), ("empty", {}), ("null", None)]
    return [("str", "zz")]


def _mutations(spec: dict[str, Any], label: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for path, value in _nodes(spec):
        if not path:
            continue
        where = label + "." + ".".join(str(p) for p in path)
        for kind, new in [("delete", None), *_replacements(value)]:
            mutated = copy.deepcopy(spec)
            parent = mutated
            for key in path[:-1]:
                parent = parent[key]
            if kind == "delete":
                del parent[path[-1]]
            else:
                parent[path[-1]] = new
            yield f"{where}:{kind}", mutated
        if isinstance(value, dict):
            mutated = copy.deepcopy(spec)
            parent = mutated
            for key in path:
                parent = parent[key]
            parent["unknown_key_xyz"] = 1
            yield f"{where}:unknown_key", mutated


def _corpus() -> list[tuple[str, dict[str, Any]]]:
    specs = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in [*SHIPPED, TOY]}
    corpus = list(specs.items())
    for label in ("voxcpm2", "toytone"):  # the two cover every definition of the schema between them
        corpus.extend(_mutations(specs[label], label))
    return corpus


CORPUS = _corpus()


def _typed_accepts(data: dict[str, Any], *, schema_checked: bool) -> bool:
    try:
        ModelSpec.model_validate(data, context={"schema_checked": schema_checked})
    except ValidationError:
        return False
    return True


def test_the_corpus_has_both_kinds() -> None:
    verdicts = [not schema_problems(d) for _, d in CORPUS]
    assert sum(verdicts) >= 50 and len(verdicts) - sum(verdicts) >= 200, (sum(verdicts), len(verdicts))


def test_schema_and_models_agree_on_every_spec_of_the_corpus() -> None:
    disagree = []
    for name, data in CORPUS:
        schema_ok = not schema_problems(data)
        if schema_ok and not _typed_accepts(data, schema_checked=True):
            disagree.append(f"{name}: the schema accepts it, the typed models do not")
        if _typed_accepts(data, schema_checked=False) != schema_ok:
            disagree.append(f"{name}: schema {'accepts' if schema_ok else 'rejects'}, ModelSpec does not")
    assert not disagree, "\n".join(disagree[:20])


def test_model_spec_names_the_schema_problem() -> None:
    data = json.loads((SPEC_DIR / "voxcpm2.json").read_text(encoding="utf-8"))
    data["tasks"] = ["sing"]
    with pytest.raises(ValidationError, match=r"schema\.json: \$\.tasks\[0\]"):
        ModelSpec.model_validate(data)
