"""Every in-tree family folder has the shape of docs/adding-a-family.md, and imports another
family only as its variant (read from the source, nothing is imported)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

FAMILIES = Path(__file__).resolve().parents[2] / "families"
#: variant family -> the base family it may import
VARIANTS = {"voxcpm1": "voxcpm2"}
NAMES = sorted(p.name for p in FAMILIES.iterdir() if (p / "__init__.py").is_file())
IMPORT = re.compile(r"^\s*(?:from|import)\s+audiocpp\.families\.(\w+)", re.MULTILINE)


def _classes(path: Path) -> dict[str, list[str]]:
    """Top-level classes of a module -> the names of their bases."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name: [ast.unparse(b) for b in node.bases] for node in tree.body
            if isinstance(node, ast.ClassDef)}


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


def test_the_in_tree_families_are_checked() -> None:
    assert {"omnivoice", "voxcpm2", "voxcpm1"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_family_folder_has_the_shape(name: str) -> None:
    folder = FAMILIES / name
    required = ["__init__.py", "config.py", "weights.py", "session.py"]
    if name not in VARIANTS:
        required += ["prompt_layout.py", "generate.py"]
        assert (folder / "model.py").is_file() or (folder / "model" / "__init__.py").is_file(), \
            f"{name}: the network goes in model.py or model/"
    missing = [f for f in required if not (folder / f).is_file()]
    assert not missing, f"{name} lacks {missing} (docs/adding-a-family.md)"
    assert "load_parts" in _functions(folder / "weights.py")
    assert any(c.endswith("Parts") for c in _classes(folder / "weights.py")), (
        f"{name}: weights.py has no <Family>Parts")
    session = _classes(folder / "session.py")
    assert any(c.endswith("LoadedModel") for c in session), f"{name}: session.py has no <Family>LoadedModel"
    assert any(c.endswith("Session") for c in session), f"{name}: session.py has no <Family>Session"


@pytest.mark.parametrize("name", NAMES)
def test_family_imports_another_only_as_its_variant(name: str) -> None:
    allowed = {name, VARIANTS.get(name)}
    found = {}
    for path in (FAMILIES / name).rglob("*.py"):
        for other in IMPORT.findall(path.read_text(encoding="utf-8")):
            if other not in allowed:
                found[str(path.relative_to(FAMILIES))] = other
    assert not found, f"{name} imports other families {found}; shared blocks belong in engine/nn"
