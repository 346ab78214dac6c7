"""A model's named voices (Kokoro's ``jf_alpha``, ``af_heart``...) as request voices.

A request's ``voice`` on a model with named voices (``LoadedModel.named_voices()``) is, in this order:

- absent or ``default``: the model's default voice (the family picks it, by the text's language);
- OpenAI's voice names (``alloy``, ``nova``...), each mapped to one of the model's voices by
  :func:`openai_voice_map`;
- a named voice, or a mix of them in Kokoro-FastAPI's syntax (``jf_alpha(2)+jm_kumo(1)``, ``a+b``,
  ``a-b``), OpenAI's names allowed as terms: it becomes the request option ``voice`` and the family
  checks the mix itself (weights, syntax) before the request is queued;
- a stored voice's name: cloning with it, where the model clones;
- anything else: a 400 that lists the model's voices and suggests the closest names.

The mapping of OpenAI's names (:func:`openai_voice_map`), one rule for every model: a voice named
``??_<openai name>`` where the model has one (hexgrad's ``af_alloy``, ``am_onyx``...); every other
OpenAI name takes, by the gender OpenAI's voice is known by (:data:`OPENAI_GENDERS`), the model's voices
of that gender in turn (in the model's order, those taken by the first rule left out), and a model
without a voice of that gender lends all its voices in turn.
"""

from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING, Any

from .errors import ApiError
from .openai_voices import OPENAI_GENDERS, openai_voice_map
from .voices import BUILTIN_VOICES, OPENAI_VOICES, StoredVoice, VoiceStore, VoiceView, shown

if TYPE_CHECKING:
    from .served_models import ServedModel

#: A term of a voice mix: a name (weights in parentheses and the ``+``/``-`` between terms are not).
_TERM = re.compile(r"[A-Za-z][A-Za-z0-9_.]*")
_MIX_MARKS = re.compile(r"[+()]|-(?=\s*[A-Za-z])")
#: How many voices an error lists before it says how many more there are.
SHOWN_VOICES = 60


def mix_terms(value: str) -> list[str]:
    """The voice names a voice or mix is made of (``jf_alpha(2)+jm_kumo`` -> ``[jf_alpha, jm_kumo]``)."""
    return _TERM.findall(re.sub(r"\([^)]*\)", " ", value))


def is_mix(value: str) -> bool:
    return _MIX_MARKS.search(value) is not None


def with_openai_names(value: str, mapping: dict[str, str]) -> str:
    """``value`` with OpenAI's names (any case) replaced by the model's voices they mean."""
    return _TERM.sub(lambda m: mapping.get(m.group(0).lower(), m.group(0)), value)


def describe_named(served: ServedModel) -> list[dict[str, Any]]:
    """The model's named voices as ``GET /v1/audio/voices`` lists them."""
    return [{"id": v["name"], "name": v["name"], "type": "named", "stored": False,
             "language": v.get("language"), "language_name": v.get("language_name"),
             "gender": v.get("gender")} for v in served.named_voices()]


def choose_voice(served: ServedModel, value: str | dict[str, Any] | None,
                 voices: VoiceStore | VoiceView) -> tuple[StoredVoice | None, str | None]:
    """(stored voice to clone with, named voice or mix for the request option ``voice``) of a request's
    ``voice``; (None, None) for the model's own default voice."""
    if isinstance(value, dict):
        value = value.get("id")
        if not isinstance(value, str):
            raise ApiError(400, "voice must be a name or {\"id\": name}", param="voice", code="invalid_value")
    named = served.named_voices()
    if not named:
        return resolve_voice(value, voices), None
    if value is None or value.strip().lower() in ("", "default"):
        return None, None
    text = value.strip()
    known = {str(v["name"]) for v in named}
    mapped = with_openai_names(text, served.openai_voices())
    terms = mix_terms(mapped)
    unknown = [t for t in terms if t not in known]
    if terms and not unknown:
        served.check_voice(mapped)
        return None, mapped
    if not is_mix(text):
        stored = voices.get(text)
        if stored is not None:
            if "clone" not in served.model.spec.tasks:
                raise ApiError(400, f"voice {shown(text)} is a stored voice, and model {served.name!r} "
                               f"({served.model.spec.display_name}) does not clone: it speaks with its own "
                               f"voices, {voice_list(served)}", param="voice", code="unsupported_voice")
            return stored, None
    raise unknown_voice(served, text, unknown[0] if unknown and is_mix(text) else None)


def voice_list(served: ServedModel) -> str:
    names = [str(v["name"]) for v in served.named_voices()]
    shown_names = ", ".join(names[:SHOWN_VOICES])
    return shown_names + (f" and {len(names) - SHOWN_VOICES} more" if len(names) > SHOWN_VOICES else "")


def unknown_voice(served: ServedModel, value: str, term: str | None = None) -> ApiError:
    """The 400 for a voice the model does not have: its voices, and the closest names."""
    wrong = term or value
    candidates = [str(v["name"]) for v in served.named_voices()] + ["default", *OPENAI_VOICES]
    close = difflib.get_close_matches(wrong, candidates, n=3, cutoff=0.6)
    model = f"model {served.name!r} ({served.model.spec.display_name})"
    what = (f"voice {shown(value)} mixes {shown(term)}, which is not a voice of {model}" if term
            else f"voice {shown(value)} is neither a voice of {model} nor a stored voice")
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return ApiError(400, f"{what}.{hint} Its voices: "
                    f"{voice_list(served)} (mixed as 'a(2)+b(1)'), default, and OpenAI's names (alloy, "
                    "nova...; GET /v1/audio/voices lists what each means)", param="voice",
                    code="voice_not_found")


__all__ = ["OPENAI_GENDERS", "choose_voice", "describe_named", "is_mix", "mix_terms", "openai_voice_map",
           "unknown_voice", "with_openai_names"]


def resolve_voice(value: str | dict[str, Any] | None, voices: VoiceStore | VoiceView) -> StoredVoice | None:
    """``None`` for the family's own voice (``default`` or an OpenAI name), else the stored voice."""
    if isinstance(value, dict):
        value = value.get("id")
        if not isinstance(value, str):
            raise ApiError(400, "voice must be a name or {\"id\": name}", param="voice", code="invalid_value")
    if value is None or value.strip().lower() in BUILTIN_VOICES:
        return None
    voice = voices.get(value)
    if voice is None:
        raise ApiError(400, f"voice {shown(value)} is neither a stored voice nor a built-in one; stored "
                       "voices are listed by GET /v1/audio/voices and added by POST /v1/audio/voices",
                       param="voice", code="voice_not_found")
    return voice
