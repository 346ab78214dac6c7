"""The option-naming rule of specs (engine.spec.canonical): request options are canonical names with
their registered type, or ``<family>.<name>``; the options the engine reads have their registered
type; docs/spec-format.md prints the same list."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import pytest

from audiocpp.engine.errors import SpecError
from audiocpp.engine.spec import load_spec_file, spec_problems, validate_spec
from audiocpp.engine.spec.canonical import (
    CANONICAL_REQUEST_OPTIONS,
    ENGINE_LOAD_OPTIONS,
    ENGINE_SESSION_OPTIONS,
)

REPO = Path(__file__).resolve().parents[2]
SPEC_DIR = Path(str(resources.files("audiocpp.model_specs")))
TOY = REPO / "tests" / "data" / "audiocpp_toyfamily" / "src" / "audiocpp_toyfamily" / "toytone.json"
SPECS = [*sorted(p for p in SPEC_DIR.glob("*.json") if p.name != "schema.json"), TOY]


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_every_spec_keeps_the_naming_rule(path: Path) -> None:
    spec = load_spec_file(path)
    for row in spec.options.request:
        if "." in row.name:
            assert row.name.startswith(f"{spec.family}.")
        else:
            assert row.type in CANONICAL_REQUEST_OPTIONS[row.name].types, row.name


def _toy() -> dict:
    return json.loads(TOY.read_text())


def _with(scope: str, row: dict) -> tuple[dict, str]:
    data = _toy()
    data["options"][scope].append({"description": "d", "required": False, **row})
    return data, f"$.options.{scope}[{len(data['options'][scope]) - 1}]"


@pytest.mark.parametrize(("scope", "row", "field", "needle"), [
    ("request", {"name": "gain", "type": "float"}, "name", "name it 'toytone.gain'"),
    ("request", {"name": "voxcpm2.gain", "type": "float"}, "name", "must start with 'toytone.'"),
    ("request", {"name": "seed", "type": "float"}, "type", "'seed' has type int, not float"),
    ("request", {"name": "language", "type": "bool"}, "type", "string or enum"),
    ("request", {"name": "speed", "type": "string"}, "type", "'speed' has type float"),
    ("session", {"name": "threads", "type": "float"}, "type", "session option 'threads' has type int"),
    ("session", {"name": "compute_dtype", "type": "string"}, "type", "has type enum"),
    ("load", {"name": "codec", "type": "string"}, "type", "load option 'codec' has type path"),
])
def test_names_and_types_that_break_the_rule(scope: str, row: dict, field: str, needle: str) -> None:
    data, path = _with(scope, row)
    problems = [p for p in spec_problems(data) if p.startswith(f"{path}.{field}:")]
    assert len(problems) == 1 and needle in problems[0], spec_problems(data)
    with pytest.raises(SpecError, match=re.escape(path)):
        validate_spec(data, origin="toytone.json")


@pytest.mark.parametrize(("scope", "row"), [
    ("request", {"name": "toytone.brightness", "type": "float"}),
    ("request", {"name": "language", "type": "enum", "values": ["en"]}),
    ("request", {"name": "temperature", "type": "float", "default": 0.7}),
    ("session", {"name": "brightness", "type": "float"}),  # session and load names are the family's own
    ("load", {"name": "mem_saver", "type": "bool"}),
])
def test_names_that_keep_the_rule(scope: str, row: dict) -> None:
    data, _ = _with(scope, row)
    assert spec_problems(data) == []


def _doc_table(title: str) -> dict[str, str]:
    """``name -> type`` rows of the table under ``title`` in docs/spec-format.md."""
    text = (REPO / "docs" / "spec-format.md").read_text(encoding="utf-8")
    section = text.split(title, 1)[1]
    rows: dict[str, str] = {}
    for line in section.splitlines()[1:]:
        if line.startswith("#"):
            break
        match = re.match(r"^\| `([a-z_]+)` \| ([a-z_ ]+?) \|", line)
        if match:
            rows[match[1]] = match[2]
    return rows


def test_docs_list_exactly_the_canonical_names_and_types() -> None:
    documented = _doc_table("### Canonical request options")
    assert documented == {name: " or ".join(row.types) for name, row in CANONICAL_REQUEST_OPTIONS.items()}
    engine = _doc_table("### Options the engine reads")
    both = {**{f"session {k}": v for k, v in ENGINE_SESSION_OPTIONS.items()},
            **{f"load {k}": v for k, v in ENGINE_LOAD_OPTIONS.items()}}
    assert set(engine) == {k.split()[1] for k in both}
    for key, row in both.items():
        assert engine[key.split()[1]] == " or ".join(row.types)
