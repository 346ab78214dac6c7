"""OmniVoice's languages: lowercase name -> id, from ``data/languages.json`` (written by
tools/omnivoice/gen_languages.py from upstream's ``omnivoice.utils.lang_map``, omnivoice 0.2.1)."""

from __future__ import annotations

import json
from pathlib import Path

_DATA = json.loads(Path(__file__).with_name("data").joinpath("languages.json").read_text(encoding="utf-8"))

LANG_NAME_TO_ID: dict[str, str] = _DATA["lang_name_to_id"]
#: Display names whose casing ``str.title()`` gets wrong.
TITLE_EXCEPTIONS: dict[str, str] = _DATA["title_exceptions"]
LANG_IDS: frozenset[str] = frozenset(LANG_NAME_TO_ID.values())
