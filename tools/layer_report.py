#!/usr/bin/env python3
"""The shape of the code, counted: import cycles, layer violations, and the modules a CLI request
crosses.

    python tools/layer_report.py [--trace]

- **import cycles**: strongly connected groups of audiocpp modules in the graph of imports, from the
  source, by AST: every import counts, at module level, inside functions and under
  ``if TYPE_CHECKING:`` (a type-only import is still a dependency a reader follows);
- **layer rule**: the engine imports no command line, server or batch module; the server and batch
  jobs import no command-line module; a family imports only the engine and its variant base
  (``audiocpp.families.<base>``), never another family's internals;
  inside ``engine.nn``, ``build`` -> ``layers`` -> ``linear`` -> ``kernels``: a sub-package imports
  only those after it (the kernels and their build import no layer, the linear backends no layer);
- **``--trace``**: runs ``audiocpp --family omnivoice --text ... --out x.wav`` on the demo model in
  this process under ``sys.setprofile`` and lists the audiocpp modules the request passes through
  from ``run_request`` to the written file, in order: how many distinct ones, and how many times
  it climbs back up into a module it had already left.

Prints the figures and exits 1 when a cycle or a layer violation is found.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: source folder -> the import name it is mapped to (pyproject's package-dir)
ROOTS = {"engine": "audiocpp.engine", "families": "audiocpp.families", "server": "audiocpp.server",
         "batch": "audiocpp.batch", "book": "audiocpp.book", "cli": "audiocpp.cli",
         "model_specs": "audiocpp.model_specs"}
ABOVE_ENGINE = ("audiocpp.cli", "audiocpp.server", "audiocpp.batch", "audiocpp.book")
#: engine.nn's parts, top first: each imports only the parts after it (and anything outside engine.nn)
NN_ORDER = ("audiocpp.engine.nn.build", "audiocpp.engine.nn.layers", "audiocpp.engine.nn.linear",
            "audiocpp.engine.nn.kernels")


def modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for folder, name in ROOTS.items():
        root = REPO / folder
        if not root.is_dir():
            continue
        for path in root.rglob("*.py"):
            rel = path.relative_to(root).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([name, *parts])] = path
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The audiocpp modules ``name`` imports (any depth: function-level and type-only imports count)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            submodules = [f"{target}.{alias.name}" for alias in node.names
                          if f"{target}.{alias.name}" in known]
            found.update(submodules)  # "from pkg import mod" imports mod (pkg itself is its parent)
            if len(submodules) < len(node.names):  # names defined in the module itself
                found.add(target)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    resolved = set()
    for target in found:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            resolved.add(target)
    return resolved


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports(name, path, known) for name, path in mods.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in edges:
        if v not in index:
            strong(v)
    return out


def _is_package_of(child: str, parent: str) -> bool:
    return child.startswith(parent + ".")


def layer_violations(edges: dict[str, set[str]]) -> list[str]:
    bad = []
    for name, targets in edges.items():
        for target in targets:
            if name.startswith("audiocpp.engine") and target.startswith(ABOVE_ENGINE):
                bad.append(f"{name} -> {target} (the engine imports nothing above it)")
            if name.startswith(("audiocpp.server", "audiocpp.batch", "audiocpp.book")) and \
                    target.startswith("audiocpp.cli"):
                bad.append(f"{name} -> {target} (the command line sits above the server, batch and book)")
            below = _nn_part(name)
            if below is not None and (above := _nn_part(target)) is not None and above < below:
                bad.append(f"{name} -> {target} (in engine.nn, {NN_ORDER[below].rsplit('.', 1)[1]} "
                           f"imports nothing of {NN_ORDER[above].rsplit('.', 1)[1]})")
            if name.startswith("audiocpp.families."):
                family = name.split(".")[2]
                if target.startswith(ABOVE_ENGINE):
                    bad.append(f"{name} -> {target} (a family imports only the engine)")
                elif target.startswith("audiocpp.families.") and target.split(".")[2] not in (family, ) \
                        and target != "audiocpp.families":
                    other = target.split(".")[2]
                    if not _variant_base(family, other):
                        bad.append(f"{name} -> {target} "
                                   "(a family imports another family only as its variant base)")
    return sorted(bad)


def _nn_part(name: str) -> int | None:
    """The index in :data:`NN_ORDER` of the engine.nn part ``name`` is in; None outside them."""
    for i, part in enumerate(NN_ORDER):
        if name == part or name.startswith(part + "."):
            return i
    return None


def _variant_base(family: str, other: str) -> bool:
    """voxcpm1 is a variant of voxcpm2 (it may import its base)."""
    return (family, other) in {("voxcpm1", "voxcpm2")}


def trace_request(tmp: Path) -> list[str]:
    """The audiocpp modules a demo CLI request runs through, in order of entry."""
    from audiocpp.cli.run import RunArgs, run_request

    order: list[str] = []

    def profile(frame, event, arg) -> None:  # noqa: ANN001
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if module.startswith("audiocpp.") and (not order or order[-1] != module):
            order.append(module)

    args = RunArgs(family="omnivoice", text="A short request.", out=tmp / "x.wav", seed=1,
                   request_options=["num_inference_steps=2"])
    sys.setprofile(profile)
    try:
        run_request(args)
    finally:
        sys.setprofile(None)
    return order


def main(argv: list[str]) -> int:
    edges = graph()
    groups = cycles(edges)
    bad = layer_violations(edges)
    print(f"modules: {len(edges)}, import edges: {sum(len(v) for v in edges.values())}")
    print(f"import cycles (every import counted, type-only and in functions too): {len(groups)}")
    for group in groups:
        print("  " + " <-> ".join(group))
    print(f"layer violations: {len(bad)}")
    for line in bad:
        print("  " + line)
    if "--trace" in argv:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            order = trace_request(Path(tmp))
        seen: set[str] = set()
        climbs = 0
        for i, module in enumerate(order):
            if module in seen and i and order[i - 1] != module:
                climbs += 1
            seen.add(module)
        print(f"a CLI request: {len(seen)} distinct modules, {len(order)} module entries, "
              f"{climbs} returns into a module already left")
    return 1 if groups or bad else 0


if __name__ == "__main__":
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    raise SystemExit(main(sys.argv[1:]))
