"""Session fixtures of the OmniVoice tests.

- ``ov_snapshot``: a tiny random checkpoint in the k2-fsa/OmniVoice layout, built once per
  session by upstream's own classes in the reference env (tools/omnivoice/checkpoint.py).
- ``ov_reference``: every parity case run once by upstream in ONE reference process
  (tools/omnivoice/reference.py), dumped as .npz.
- ``demo_snapshot``: the demo checkpoint written by our own code (no reference env needed).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.omnivoice.cases import batch_cases, cases, write_cases, write_references
from tests.support import REPO, run_reference

TOOLS = REPO / "tools" / "omnivoice"


@dataclass
class Reference:
    out: Path
    cases: list[dict[str, Any]]
    summary: dict[str, Any]
    refs: dict[str, Path]
    batches: list[dict[str, Any]]

    def case(self, name: str) -> dict[str, Any]:
        return next(c for c in self.cases if c["name"] == name)


@pytest.fixture(scope="session")
def ov_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("omnivoice-ckpt") / "OmniVoice"
    run_reference("omnivoice", TOOLS / "checkpoint.py", out, timeout=600)
    return out


@pytest.fixture(scope="session")
def ov_reference(ov_snapshot: Path, tmp_path_factory: pytest.TempPathFactory) -> Reference:
    work = tmp_path_factory.mktemp("omnivoice-ref")
    refs = write_references(work / "refs")
    items = cases(refs, work / "upstream_prompt.pt")
    batches = batch_cases(refs)
    write_cases(work / "cases.json", items + batches)
    summary = run_reference("omnivoice", TOOLS / "reference.py", ov_snapshot, work / "cases.json",
                            work / "out", timeout=1200)
    return Reference(work / "out", items, summary, refs, batches)


@pytest.fixture(scope="session")
def ov_model(ov_snapshot: Path):
    from audiocpp.engine.registry import get_family

    return get_family("omnivoice").load(ov_snapshot)


@pytest.fixture(scope="session")
def demo_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from audiocpp.families.omnivoice.demo import write_demo

    out = tmp_path_factory.mktemp("omnivoice-demo") / "OmniVoice"
    write_demo(out)
    return out


@pytest.fixture(scope="session")
def demo_model(demo_snapshot: Path):
    from audiocpp.engine.registry import get_family

    return get_family("omnivoice").load(demo_snapshot)
