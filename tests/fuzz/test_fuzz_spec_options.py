"""Fuzz spec validation (the shipped specs with parts replaced by any JSON, and as mangled
text) and option parsing (``k=v`` strings and Python values of every type, for every option
of every shipped spec): only SpecError and UsageError come out.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from audiocpp.engine.spec import load_spec_text, parse_key_values, resolve_options
from audiocpp.engine.spec.model_spec import ModelSpec

from . import seeds
from .harness import check, fuzz_settings
from .mutate import INTERESTING

JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.sampled_from(INTERESTING),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12))
JSON = st.recursive(JSON_SCALARS,
                    lambda inner: st.one_of(st.lists(inner, max_size=3),
                                            st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                    max_leaves=10)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out.extend(_paths(value, (*prefix, key)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out.extend(_paths(value, (*prefix, i)))
    return out


@cache
def spec_trees() -> dict[str, tuple[Any, list[tuple]]]:
    out = {}
    for name, text in seeds.spec_texts().items():
        tree = json.loads(text)
        out[name] = (tree, _paths(tree))
    return out


@st.composite
def mangled_specs(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(sorted(spec_trees())))
    tree, paths = spec_trees()[name]
    tree = copy.deepcopy(tree)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        if not path:
            continue
        parent = tree
        try:
            for key in path[:-1]:
                parent = parent[key]
            action = draw(st.integers(0, 3))
            if action == 0:
                parent[path[-1]] = draw(JSON)
            elif action == 1:
                del parent[path[-1]]
            elif action == 2 and isinstance(parent, dict):
                parent[draw(st.text(max_size=8))] = draw(JSON)
            else:
                parent[path[-1]] = copy.deepcopy(parent[path[-1]]) if draw(st.booleans()) else None
        except (KeyError, IndexError, TypeError):
            continue
    text = json.dumps(tree)
    if draw(st.integers(0, 4)) == 0:  # and as text: a cut, a byte changed
        cut = draw(st.integers(0, len(text)))
        text = text[:cut] + draw(st.text(max_size=3)) + text[cut + draw(st.integers(0, 3)):]
    return text


@given(mangled_specs())
@fuzz_settings("spec_json")
def test_mangled_specs(text: str) -> None:
    outcome = check("spec_json", lambda: load_spec_text(text, origin="fuzz"))
    if isinstance(outcome, ModelSpec):  # a spec that validates must also parse options
        for scope in ("request", "session", "load"):
            check("spec_json", lambda scope=scope: resolve_options(outcome, scope, {}))


@cache
def shipped_specs() -> list[ModelSpec]:
    return [load_spec_text(text, origin=name) for name, text in sorted(seeds.spec_texts().items())]


RAW = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["~nosuchuser", "~nosuchuser/x.wav", "a\0b", "9" * 5000, "1e999", "nan", "a,~x,b"]),
    st.sampled_from(["", " ", "1", "-1", "0x10", "1e999", "-1e999", "nan", "inf", "1_000", "١٢٣", "²", "True",
                     "on", "~", "~nosuchuser/x", "~/x", "a\0b", "/", ".", "..", "a,b,,c", ",", "9" * 5000,
                     "1" * 400 + ".5", "float32", "BF16", " fp16 ", "2**63", str(2**63), str(-(2**63) - 1),
                     "\u202e1"]),
)
PY = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.binary(max_size=4),
               st.lists(st.one_of(st.text(max_size=4), st.floats(), st.integers()), max_size=4), JSON, RAW)


@cache
def rows_by_type() -> dict[str, list[tuple[ModelSpec, str, str]]]:
    """Every option of every shipped spec, by option type: ``(spec, scope, name)``."""
    out: dict[str, list[tuple[ModelSpec, str, str]]] = {}
    for spec in shipped_specs():
        for scope in ("request", "session", "load"):
            for row in spec.options.scope(scope):
                out.setdefault(row.type, []).append((spec, scope, row.name))
    return out


@st.composite
def option_sets(draw: st.DrawFn) -> tuple[ModelSpec, str, dict[str, Any]]:
    """Options of one spec and scope; the first is drawn by type, so that rare types (paths,
    lists) are as likely as common ones."""
    kind = draw(st.sampled_from(sorted(rows_by_type())))
    spec, scope, name = draw(st.sampled_from(rows_by_type()[kind]))
    rows = spec.options.scope(scope)
    given: dict[str, Any] = {}
    for i in range(draw(st.integers(1, 3))):
        if i and draw(st.integers(0, 5)) == 0:
            name = draw(st.text(max_size=10))
        elif i:
            name = draw(st.sampled_from(rows)).name
        if scope != "request" and draw(st.integers(0, 3)) == 0:
            name = f"{draw(st.sampled_from([spec.family, 'other', '']))}.{name}"
        given[name] = draw(RAW if draw(st.booleans()) else PY)
    return spec, scope, given


@given(option_sets(), st.lists(RAW, max_size=4))
@fuzz_settings("options")
def test_options_of_every_type(case: tuple[ModelSpec, str, dict[str, Any]], items: list[str]) -> None:
    spec, scope, given = case
    check("options", lambda: resolve_options(spec, scope, given))
    pairs = [f"{k}={v}" if isinstance(v, str) else k for k, v in given.items()] + items
    parsed = check("options", lambda: parse_key_values(pairs, flag=f"--{scope}-option"))
    if isinstance(parsed, dict):
        check("options", lambda: resolve_options(spec, scope, parsed))
