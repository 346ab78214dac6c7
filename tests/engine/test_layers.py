"""The import graph keeps its shape: no import cycles (every import counts: type-only ones and those
inside functions too), and layers that import downward only (tools/layer_report.py;
docs/architecture.md). The checks are first shown to catch a cycle and each kind of violation on a
made-up graph, then run on the real source."""

from __future__ import annotations

from tools import layer_report


def test_the_checks_catch_a_cycle_and_each_upward_import() -> None:
    edges = {
        "audiocpp.engine.a": {"audiocpp.engine.b"},
        "audiocpp.engine.b": {"audiocpp.engine.c"},
        "audiocpp.engine.c": {"audiocpp.engine.a", "audiocpp.server.app"},
        "audiocpp.server.app": {"audiocpp.cli.main"},
        "audiocpp.families.omnivoice.session": {"audiocpp.families.voxcpm2.weights", "audiocpp.batch.jobs"},
        "audiocpp.families.voxcpm1.session": {"audiocpp.families.voxcpm2.model"},
        "audiocpp.engine.nn.kernels.jit": {"audiocpp.engine.nn.linear.pack_cache",
                                           "audiocpp.engine.nn.kernels"},
        "audiocpp.engine.nn.linear.choice": {"audiocpp.engine.nn.layers.decoder",
                                             "audiocpp.engine.nn.kernels.jit"},
        "audiocpp.engine.nn.layers.dac": {"audiocpp.engine.nn.build", "audiocpp.engine.nn.linear.choice"},
    }
    assert layer_report.cycles(edges) == [["audiocpp.engine.a", "audiocpp.engine.b", "audiocpp.engine.c"]]
    bad = layer_report.layer_violations(edges)
    assert [line.split(" (")[0] for line in bad] == [
        "audiocpp.engine.c -> audiocpp.server.app",
        "audiocpp.engine.nn.kernels.jit -> audiocpp.engine.nn.linear.pack_cache",
        "audiocpp.engine.nn.layers.dac -> audiocpp.engine.nn.build",
        "audiocpp.engine.nn.linear.choice -> audiocpp.engine.nn.layers.decoder",
        "audiocpp.families.omnivoice.session -> audiocpp.batch.jobs",
        "audiocpp.families.omnivoice.session -> audiocpp.families.voxcpm2.weights",
        "audiocpp.server.app -> audiocpp.cli.main",
    ]  # voxcpm1 -> voxcpm2 is its variant base: allowed


def test_type_only_and_function_level_imports_are_edges(tmp_path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from typing import TYPE_CHECKING\n"
                      "if TYPE_CHECKING:\n    from audiocpp.engine import b\n"
                      "def f():\n    from audiocpp.engine import c\n")
    known = {"audiocpp.engine", "audiocpp.engine.b", "audiocpp.engine.c"}
    found = layer_report.imports("audiocpp.engine.a", module, known)
    assert found == {"audiocpp.engine.b", "audiocpp.engine.c"}


def test_the_source_has_no_import_cycles_and_no_upward_imports() -> None:
    edges = layer_report.graph()
    assert len(edges) > 100  # the whole source was read
    assert layer_report.cycles(edges) == []
    assert layer_report.layer_violations(edges) == []
