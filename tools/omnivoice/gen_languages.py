#!/usr/bin/env python3
"""Regenerate ``families/omnivoice/data/languages.json`` (read by ``languages.py``) and the spec's
``languages`` list from upstream's ``omnivoice.utils.lang_map`` (data only). Run with the
reference env's python:

    .ref-envs/omnivoice/bin/python tools/omnivoice/gen_languages.py
"""

from __future__ import annotations

import json
from pathlib import Path

from omnivoice.utils.lang_map import _TITLE_EXCEPTIONS, LANG_NAME_TO_ID

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "families" / "omnivoice" / "data" / "languages.json"
SPEC = REPO / "model_specs" / "omnivoice.json"


def main() -> None:
    data = {"source": "omnivoice.utils.lang_map (omnivoice 0.2.1), by tools/omnivoice/gen_languages.py; "
                      "do not edit by hand",
            "lang_name_to_id": dict(LANG_NAME_TO_ID), "title_exceptions": dict(_TITLE_EXCEPTIONS)}
    OUT.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    spec = json.loads(SPEC.read_text())
    spec["languages"] = ["auto", *sorted(set(LANG_NAME_TO_ID.values()))]
    SPEC.write_text(json.dumps(spec, indent=2, ensure_ascii=False) + "\n")
    print(f"{len(LANG_NAME_TO_ID)} names, {len(set(LANG_NAME_TO_ID.values()))} ids "
          f"-> {OUT.relative_to(REPO)}")


if __name__ == "__main__":
    main()
