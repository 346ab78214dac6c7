"""What OpenAI's voice names mean on a model with named voices (Kokoro's): one rule for every model.

A voice named ``??_<openai name>`` where the model has one (hexgrad's ``af_alloy``, ``am_onyx``...); every
other OpenAI name takes, by the gender OpenAI's voice is known by (:data:`OPENAI_GENDERS`), the model's
voices of that gender in turn (in the model's order, those taken by the first rule left out), and a model
without a voice of that gender lends all its voices in turn.
"""

from __future__ import annotations

from typing import Any

from .voices import OPENAI_VOICES

#: The gender each of OpenAI's voices is known by (a fixed table: it decides the mapping above).
OPENAI_GENDERS = {"alloy": "female", "ash": "male", "ballad": "male", "coral": "female", "echo": "male",
                  "fable": "male", "onyx": "male", "nova": "female", "sage": "female", "shimmer": "female",
                  "verse": "male", "marin": "female", "cedar": "male"}


def openai_voice_map(voices: list[dict[str, Any]]) -> dict[str, str]:
    """OpenAI's voice names -> the model's voice each means (empty for a model without named voices)."""
    names = [str(v["name"]) for v in voices]
    if not names:
        return {}
    mapping: dict[str, str] = {}
    for openai in OPENAI_VOICES:
        own = [n for n in names if len(n) > 3 and n[2] == "_" and n[3:].lower() == openai]
        if own:
            mapping[openai] = own[0]
    taken = set(mapping.values())
    turns: dict[str, int] = {}
    for openai in OPENAI_VOICES:
        if openai in mapping:
            continue
        gender = OPENAI_GENDERS.get(openai)
        pool = ([str(v["name"]) for v in voices if v.get("gender") == gender and v["name"] not in taken]
                or [n for n in names if n not in taken] or names)
        turn = turns.get(gender or "", 0)
        mapping[openai] = pool[turn % len(pool)]
        turns[gender or ""] = turn + 1
    return mapping
