"""The one config reader (``engine.config_values``): fields read by their types, defaults, nested
and prefixed sections, derived defaults, the two hooks, and errors that name the file, the field and
its upstream key."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

import pytest

from audiocpp.engine.config_values import (
    MALFORMED,
    ConfigSection,
    config_error,
    key_paths,
    nest,
    scalar_kind,
    setting,
)
from audiocpp.engine.errors import ModelError


@dataclass(frozen=True)
class Inner(ConfigSection):
    size: int
    scale: float = 1.0


@dataclass(frozen=True)
class Flat(ConfigSection):
    width: int = 4


@dataclass(frozen=True)
class Outer(ConfigSection):
    name: str
    inner: Inner = setting(key="inner_config")
    flag: bool = False
    rates: tuple[int, ...] = (2, 4)
    grid: tuple[tuple[float, ...], ...] = ()
    table: dict[str, int] = setting(factory=dict)
    kind: Literal["a", "b"] = "a"
    maybe: int | None = 7
    offset: int = setting(0, zero_ok=True)
    double: int = setting(1, derive=lambda values, _: values["inner"].size * 2)
    deep: float = setting(0.5, key="inner_config.deep")
    flat: Flat = setting(factory=Flat, prefix="flat_")
    raw: dict[str, Any] = setting(factory=dict, read=False, derive=lambda _, raw: dict(raw), compare=False)


MINIMAL = {"name": "x", "inner_config": {"size": 3}}


def read(raw: dict[str, Any], **changes: Any) -> Outer:
    return Outer.from_dict({**raw, **changes}, where="/m/config.json")


def test_absent_keys_take_the_defaults_and_derived_values() -> None:
    cfg = read(MINIMAL)
    assert cfg == Outer(name="x", inner=Inner(size=3), double=6)
    assert cfg.raw == MINIMAL and cfg.flat == Flat()


def test_values_are_read_by_their_types() -> None:
    cfg = read(MINIMAL, inner_config={"size": 2.0, "scale": 3, "deep": 2}, flag=True, rates=[1, 2, 3],
               grid=[[1, 2.5], []], table={"a": 1}, kind="b", maybe=None, offset=0, double=5, flat_width=9,
               unknown="ignored")
    assert cfg.inner == Inner(size=2, scale=3.0) and cfg.deep == 2.0
    assert type(cfg.inner.size) is int and type(cfg.inner.scale) is float and type(cfg.deep) is float
    assert cfg.rates == (1, 2, 3) and cfg.grid == ((1.0, 2.5), ()) and type(cfg.grid[0][0]) is float
    assert (cfg.flag, cfg.table, cfg.kind, cfg.maybe) == (True, {"a": 1}, "b", None)
    assert (cfg.offset, cfg.double) == (0, 5)
    assert cfg.flat == Flat(width=9)


def test_null_counts_as_absent_except_for_optional_fields() -> None:
    cfg = read(MINIMAL, flag=None, rates=None, double=None, maybe=None)
    assert (cfg.flag, cfg.rates, cfg.double, cfg.maybe) == (False, (2, 4), 6, None)


@pytest.mark.parametrize(("changes", "words"), [
    ({"name": None}, "/m/config.json: name is missing"),
    ({"inner_config": {}}, "/m/config.json: inner.size is missing (key inner_config.size)"),
    ({"inner_config": 5}, "inner: expected an object, got 5 (key inner_config)"),
    ({"name": 5}, "name: expected a string, got 5"),
    ({"flag": "false"}, "flag: expected true or false, got 'false'"),
    ({"flag": 1}, "flag: expected true or false, got 1"),
    ({"inner_config": {"size": "3"}}, "inner.size: expected an integer, got '3' (key inner_config.size)"),
    ({"inner_config": {"size": True}}, "inner.size: expected an integer, got True"),
    ({"inner_config": {"size": 1.5}}, "inner.size must be an integer, got 1.5 (key inner_config.size)"),
    ({"inner_config": {"size": 0}}, "inner.size must be positive, got 0"),
    ({"inner_config": {"size": 1, "scale": [1]}}, "inner.scale: expected a number, got [1]"),
    ({"inner_config": {"size": 1, "scale": float("inf")}}, "inner.scale must be a finite number, got inf"),
    ({"inner_config": {"size": 1, "deep": "x"}}, "deep: expected a number, got 'x' (key inner_config.deep)"),
    ({"offset": -1}, "offset must be non-negative, got -1"),
    ({"rates": 3}, "rates: expected a list, got 3"),
    ({"rates": [2, 0]}, "rates[1] must be positive, got 0"),
    ({"grid": [[1.0], ["x"]]}, "grid[1][0]: expected a number, got 'x'"),
    ({"table": {"a": "1"}}, "table['a']: expected an integer, got '1'"),
    ({"table": [1]}, "table: expected an object, got [1]"),
    ({"kind": "c"}, "kind must be one of 'a', 'b', got 'c'"),
    ({"maybe": 0}, "maybe must be positive, got 0"),
    ({"flat_width": 0}, "flat.width must be positive, got 0 (key flat_width)"),
])
def test_a_bad_value_is_one_model_error_naming_the_file_field_and_key(changes: dict[str, Any],
                                                                      words: str) -> None:
    with pytest.raises(ModelError, match=re.escape(words)) as info:
        read(MINIMAL, **changes)
    assert info.value.hint == MALFORMED and str(info.value).startswith("/m/config.json: ")


def test_a_config_that_is_not_an_object() -> None:
    with pytest.raises(ModelError, match=r"^x.json is not a JSON object") as info:
        Outer.from_dict([1], where="x.json", hint="is this a checkpoint?")
    assert info.value.hint == "is this a checkpoint?"


@dataclass(frozen=True)
class Hooked(ConfigSection):
    heads: int
    kv_heads: int = setting(derive=lambda values, _: values["heads"])

    @classmethod
    def prepare(cls, raw: dict[str, Any], where: str) -> dict[str, Any]:
        if raw.get("model_type", "mine") != "mine":
            raise ModelError(f"{where} is a {raw['model_type']!r} config")
        if "n_head" in raw:  # an upstream alias
            raw["heads"] = raw.pop("n_head")
        return raw

    def check(self, where: str) -> None:
        if self.heads % self.kv_heads:
            raise config_error(where, "heads must be a multiple of kv_heads")


@dataclass(frozen=True)
class HookedParent(ConfigSection):
    attention: Hooked


def test_prepare_maps_upstream_shapes_and_check_sees_the_read_section() -> None:
    assert Hooked.from_dict({"n_head": 4}) == Hooked(heads=4, kv_heads=4)
    assert HookedParent.from_dict({"attention": {"heads": 4, "kv_heads": 2}}).attention == Hooked(4, 2)
    with pytest.raises(ModelError, match="^config.json is a 'theirs' config"):
        Hooked.from_dict({"model_type": "theirs", "heads": 4})
    with pytest.raises(ModelError, match="^c.json: heads must be a multiple of kv_heads") as info:
        HookedParent.from_dict({"attention": {"heads": 4, "kv_heads": 3}}, where="c.json")
    assert info.value.hint == MALFORMED
    with pytest.raises(ModelError, match=r"attention.heads must be positive, got 0"):
        HookedParent.from_dict({"attention": {"heads": 0}})  # field checks run before check()


def test_key_paths_and_nest_rebuild_a_flat_store() -> None:
    paths = key_paths(Outer)
    assert paths["inner_config.size"] is int and paths["inner_config.deep"] is float
    assert paths["flat_width"] is int and "raw" not in paths and "inner" not in paths
    assert {scalar_kind(paths[k]) for k in ("rates", "grid", "kind", "maybe")} == {int, float, str}
    flat = {"name": "x", "inner_config.size": 3, "inner_config.deep": 1.0, "flat_width": 2}
    assert nest(flat) == {"name": "x", "inner_config": {"size": 3, "deep": 1.0}, "flat_width": 2}
    assert read(nest(flat)) == Outer(name="x", inner=Inner(3), double=6, deep=1.0, flat=Flat(2))
