"""Kokoro-FastAPI's phoneme routes, for the models that speak from phonemes (spec option ``phonemes``):

- ``POST /dev/phonemize`` ``{"text", "language"}`` -> ``{"phonemes", "tokens"}`` (plus ``language``,
  what the front end used, and ``model``): the family's text front end alone
  (``LoadedModel.phonemize``). ``language`` defaults to ``a`` (American English), as Kokoro-FastAPI's
  does; ``model`` (ours) picks the model, else the first served one that speaks from phonemes.
- ``POST /dev/generate_from_phonemes`` ``{"phonemes", "voice"}`` (and ``speed``, ``seed``, ``model``,
  ``response_format``, any request option, as ``POST /v1/audio/speech`` takes them) -> the audio, a WAV
  by default: a synthesis with the request option ``phonemes`` on, through the model's queue and batch
  like every other.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, StrictStr, ValidationError

from audiocpp.engine.errors import AudiocppError

from .errors import ApiError, from_engine_error
from .speech import OPENAI_MODELS, SpeechBody, json_value, parse_body, pick_model, request_language

if TYPE_CHECKING:
    from .served_models import ServedModel
    from .state import ServerState

#: Kokoro-FastAPI's default language of /dev/phonemize: American English.
DEFAULT_LANGUAGE = "a"


class PhonemizeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: StrictStr
    language: StrictStr = DEFAULT_LANGUAGE
    model: StrictStr | None = None


def phoneme_model(state: ServerState, name: str | None) -> ServedModel:
    """The model ``name`` names (OpenAI's names: the first), else the first served model that speaks from
    phonemes; a 400 for a model that does not."""
    if name is not None and name not in OPENAI_MODELS:
        served = pick_model(state.models, name)
    else:
        speaking = [served for served in state.models.values() if served.speaks_phonemes]
        served = speaking[0] if speaking else next(iter(state.models.values()))
    if not served.speaks_phonemes:
        others = [n for n, m in state.models.items() if m.speaks_phonemes]
        which = (f"; models here that do: {', '.join(others)}" if others
                 else "; none of the models served here does")
        raise ApiError(400, f"model {served.name!r} ({served.model.spec.display_name}) does not speak from "
                       f"phonemes{which}", param="model", code="unsupported_option")
    return served


def parse_phonemize(data: Any) -> PhonemizeBody:
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_request")
    try:
        return PhonemizeBody.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        field = str(first.get("loc", ("",))[0]) or None
        if first.get("type") == "extra_forbidden":
            raise ApiError(400, f"{field} is not a field of /dev/phonemize (text, language, model)",
                           param=field, code="invalid_value") from None
        if first.get("type") == "missing":
            raise ApiError(400, f"{field} is missing: give the text to phonemize", param=field,
                           code="invalid_value") from None
        raise ApiError(400, f"{field} must be a string, not {json_value(data.get(field))}", param=field,
                       code="invalid_value") from None


async def phonemize(state: ServerState, data: Any, max_chars: int) -> tuple[ServedModel, dict[str, Any]]:
    """``POST /dev/phonemize``: (the model, ``{"phonemes", "tokens", "language", "model"}``)."""
    body = parse_phonemize(data)
    served = phoneme_model(state, body.model)
    if not body.text.strip():
        raise ApiError(400, "text is empty: give the text to phonemize", param="text", code="empty_input")
    if len(body.text) > max_chars:
        raise ApiError(400, f"text is {len(body.text)} characters long; this server takes at most "
                       f"{max_chars}", param="text", code="input_too_long")
    request_language(served, body.language)  # the family's own check, a 400 on language
    try:
        found = await asyncio.to_thread(served.phonemize, body.text, body.language)
    except AudiocppError as error:
        raise from_engine_error(error, param="text") from None
    return served, {"phonemes": found["phonemes"], "tokens": list(found["tokens"]),
                    "language": found.get("language"), "model": served.name}


def phonemes_body(state: ServerState, data: Any) -> SpeechBody:
    """``POST /dev/generate_from_phonemes``'s body as a speech body: ``phonemes`` is the input, spoken with
    the request option ``phonemes`` on, as a WAV unless ``response_format`` asks for another."""
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_request")
    body = dict(data)
    if "input" in body:
        raise ApiError(400, "/dev/generate_from_phonemes takes the phonemes as phonemes, not input "
                       "(text goes to POST /v1/audio/speech)", param="input", code="invalid_value")
    phonemes = body.pop("phonemes", None)
    if not isinstance(phonemes, str):
        raise ApiError(400, f"phonemes must be a string of phonemes, not {json_value(phonemes)}",
                       param="phonemes", code="invalid_value")
    for field in ("stream", "stream_format"):
        if body.get(field) not in (None, False):
            raise ApiError(400, f"/dev/generate_from_phonemes answers with the whole audio ({field} is not "
                           "taken; POST /v1/audio/speech streams, with phonemes: true)", param=field,
                           code="invalid_value")
        body.pop(field, None)
    served = phoneme_model(state, body.get("model") if isinstance(body.get("model"), str) else None)
    body["model"] = served.name
    body.setdefault("response_format", "wav")
    return parse_body({**body, "input": phonemes, "phonemes": True})


__all__ = ["phonemes_body", "phonemize"]
