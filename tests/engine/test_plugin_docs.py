"""docs/adding-a-family.md walks through the toy family file by file: every listing there is the
file of tests/data/audiocpp_toyfamily it names (which the suite installs and runs), and every file
of the toy distribution is shown."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOY = REPO / "tests" / "data" / "audiocpp_toyfamily"
DOC = REPO / "docs" / "adding-a-family.md"
LISTING = re.compile(r"^```[a-z]+ (?P<path>\S+)\n(?P<body>.*?)^```$", re.S | re.M)


def _listings() -> dict[str, str]:
    return {m["path"]: m["body"] for m in LISTING.finditer(DOC.read_text(encoding="utf-8"))}


def test_every_listing_is_the_toy_file_it_names() -> None:
    listings = _listings()
    assert listings, "no file listings found"
    for path, body in listings.items():
        assert (TOY / path).is_file(), f"the docs list {path}, which the toy family does not have"
        assert body == (TOY / path).read_text(encoding="utf-8"), (
            f"the listing of {path} differs from the file")


def test_every_file_of_the_toy_distribution_is_listed() -> None:
    files = {p.relative_to(TOY).as_posix() for p in TOY.rglob("*")
             if p.is_file() and "__pycache__" not in p.parts}
    assert files == set(_listings())
