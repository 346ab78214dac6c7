"""Every shipped spec validates; broken specs are rejected with the JSON path of the problem."""

from __future__ import annotations

import copy
import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from audiocpp.engine.errors import SpecError
from audiocpp.engine.spec import load_spec_file, spec_problems, validate_spec
from audiocpp.engine.spec.validate import schema

SPEC_DIR = Path(str(resources.files("audiocpp.model_specs")))
SHIPPED = sorted(p for p in SPEC_DIR.glob("*.json") if p.name != "schema.json")


def test_schema_is_a_valid_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(schema())
    assert schema()["$schema"].endswith("2020-12/schema")


def test_the_four_builtin_specs_ship() -> None:
    assert {p.stem for p in SHIPPED} >= {"omnivoice", "voxcpm1", "voxcpm2", "audio8_tts"}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_spec_validates(path: Path) -> None:
    spec = load_spec_file(path)
    assert spec.family == path.stem
    assert spec.tasks and spec.modes and spec.languages
    assert spec.options.request, "every family takes request options"
    if not spec.runnable:
        assert spec.status_note, "a family that cannot run must say why"


def _base() -> dict:
    return json.loads((SPEC_DIR / "voxcpm2.json").read_text())


_NEXT_REQUEST = len(_base()["options"]["request"])  # index an appended request option gets
_NEXT_SESSION = len(_base()["options"]["session"])


def _set(path: str, value):
    def mutate(spec: dict) -> None:
        node = spec
        keys = path.split(".")
        for key in keys[:-1]:
            node = node[int(key)] if isinstance(node, list) else node[key]
        last = keys[-1]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return mutate


def _option(scope: str, row: dict):
    def mutate(spec: dict) -> None:
        spec["options"][scope].append(row)
    return mutate


def _two_default_packages(spec: dict) -> None:
    for pkg in spec["packages"]:
        pkg["default"] = True


def _duplicate_option(spec: dict) -> None:
    spec["options"]["request"].append(copy.deepcopy(spec["options"]["request"][0]))


def _unknown_key(spec: dict) -> None:
    spec["voices"] = ["alloy"]


def _capability_without_task(spec: dict) -> None:
    spec["tasks"] = ["tts", "clone"]


def _undeclared_root(spec: dict) -> None:
    spec["sources"][0]["tensors"]["weights"] = "elsewhere:model.safetensors"


def _download_without_repo(spec: dict) -> None:
    spec["package_defaults"]["download"] = {"kind": "huggingface_snapshot"}


BROKEN = [
    ("schema_version", _set("schema_version", 2), "$.schema_version"),
    ("status", _set("status", "beta"), "$.status"),
    ("empty_tasks", _set("tasks", []), "$.tasks"),
    ("unknown_task", _set("tasks", ["sing"]), "$.tasks[0]"),
    ("unknown_mode", _set("modes", ["batch"]), "$.modes[0]"),
    ("option_type", _option("request", {"name": "x", "type": "color", "description": "d", "required": False}),
     f"$.options.request[{_NEXT_REQUEST}].type"),
    ("min_on_string", _option("request", {"name": "x", "type": "string", "description": "d",
                                           "required": False, "min": 1}),
     f"$.options.request[{_NEXT_REQUEST}].type"),
    ("values_and_preset", _option("request", {"name": "x", "type": "enum", "description": "d",
                                               "required": False, "values": ["a"],
                                               "preset": "weight_type_full"}),
     f"$.options.request[{_NEXT_REQUEST}]"),
    ("default_above_max", _option("request", {"name": "x", "type": "int", "description": "d",
                                               "required": False, "default": 11, "max": 10}),
     f"$.options.request[{_NEXT_REQUEST}].default"),
    ("enum_default", _option("request", {"name": "x", "type": "enum", "description": "d", "required": False,
                                          "values": ["a", "b"], "default": "c"}),
     f"$.options.request[{_NEXT_REQUEST}].default"),
    ("bool_default_type", _option("request", {"name": "x", "type": "bool", "description": "d",
                                               "required": False, "default": "yes"}),
     f"$.options.request[{_NEXT_REQUEST}].default"),
    ("dotted_session_option", _option("session", {"name": "voxcpm2.mem_saver", "type": "bool",
                                                   "description": "d", "required": False}),
     f"$.options.session[{_NEXT_SESSION}].name"),
    ("foreign_namespaced_option", _option("request", {"name": "omnivoice.t_shift", "type": "float",
                                                       "description": "d", "required": False}),
     f"$.options.request[{_NEXT_REQUEST}].name"),
    ("missing_description", _option("request", {"name": "x", "type": "int", "required": False}),
     f"$.options.request[{_NEXT_REQUEST}]"),
    ("two_default_packages", _two_default_packages, "$.packages"),
    ("duplicate_option", _duplicate_option, f"$.options.request[{_NEXT_REQUEST}].name"),
    ("unknown_top_level_key", _unknown_key, "$"),
    ("capability_without_task", _capability_without_task, "$.capabilities.design"),
    ("tensor_ref_without_root", _set("sources.0.tensors.weights", "model.safetensors"),
     "$.sources[0].tensors.weights"),
    ("undeclared_root", _undeclared_root, "$.sources[0].tensors.weights"),
    ("download_without_repo", _download_without_repo, "$.package_defaults.download"),
    ("bad_recommended_package", _set("ui.recommended_package", "nope"), "$.ui.recommended_package"),
]


@pytest.mark.parametrize(("name", "mutate", "json_path"), BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_spec_is_rejected_with_its_json_path(name: str, mutate, json_path: str) -> None:
    data = _base()
    mutate(data)
    problems = spec_problems(data)
    assert problems, f"{name}: the broken spec was accepted"
    assert any(p.startswith(json_path + ":") for p in problems), (name, problems)
    with pytest.raises(SpecError) as err:
        validate_spec(data, origin=f"{name}.json")
    assert json_path in str(err.value)


def test_family_must_match_file_name(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps(_base()))
    with pytest.raises(SpecError, match=r"\$\.family"):
        load_spec_file(path)


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "voxcpm2.json"
    path.write_text('{"schema_version": 1,\n  "family": }')
    with pytest.raises(SpecError, match="line 2 column"):
        load_spec_file(path)


def test_at_least_ten_broken_specs_are_covered() -> None:
    assert len(BROKEN) >= 10


def test_a_valid_spec_is_validated_once_per_machine(tmp_path, monkeypatch) -> None:
    import json

    from audiocpp.engine.spec import schema as schema_module
    from audiocpp.engine.spec.validate import builtin_spec_path

    monkeypatch.setenv("AUDIOCPP_CACHE_DIR", str(tmp_path))
    data = json.loads(builtin_spec_path("voxcpm1").read_text(encoding="utf-8"))
    assert schema_module.schema_problems(data) == []
    assert len(list((tmp_path / "spec-ok").iterdir())) == 1

    def no_validator():
        raise AssertionError("validated again")

    monkeypatch.setattr(schema_module, "_validator", no_validator)
    assert schema_module.schema_problems(data) == []  # remembered
    broken = dict(data, tasks="tts")  # another spec: validated (and the validator is asked)
    try:
        schema_module.schema_problems(broken)
    except AssertionError as exc:
        assert "validated again" in str(exc)
    monkeypatch.undo()
    monkeypatch.setenv("AUDIOCPP_CACHE_DIR", str(tmp_path))
    assert schema_module.schema_problems(broken)  # invalid: said, and never remembered
    assert len(list((tmp_path / "spec-ok").iterdir())) == 1
