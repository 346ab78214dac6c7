"""Kokoro's text front end: user text -> phoneme tokens (G2P), and what is done with the tokens.

``phonemize(text, language)`` returns a :class:`G2PResult`: the language used, whether it was
guessed (and why), and :class:`Token` records (one per word or punctuation mark, with the span of the
original text it came from). English and the other espeak-ng languages go through
:mod:`.normalize` (numbers, currency, abbreviations, initialisms, punctuation) and espeak-ng
(:mod:`.espeak`, :mod:`.assemble`); Japanese through pyopenjtalk and misaki's romanizer
(:mod:`.japanese`). :func:`chunk_tokens` cuts tokens into forwards of at most 510 phonemes as
upstream's ``KPipeline`` does; :func:`filter_vocab` drops what the model's vocabulary lacks.

Importing this package is cheap: espeak-ng, phonemizer, pyopenjtalk and num2words are imported on
first use; :func:`ensure_ready` does that ahead of time for one language.
"""

from __future__ import annotations

import warnings

from audiocpp.engine.errors import AudiocppWarning, UsageError

from .languages import KOKORO_LANGUAGES, check_language, detect_language, is_trained
from .tokens import (
    MAX_PHONEMES,
    G2PResult,
    Token,
    chunk_tokens,
    dropped_message,
    filter_tokens,
    filter_vocab,
    phonemes_of,
    warn_dropped,
)

__all__ = [
    "KOKORO_LANGUAGES", "MAX_PHONEMES", "G2PResult", "Token", "check_language", "chunk_tokens",
    "detect_language", "dropped_message", "ensure_ready", "filter_tokens", "filter_vocab", "phonemes_of",
    "phonemize", "warn_dropped",
]


def _untrained_warning(language: str) -> None:
    from .languages import espeak_languages

    name = espeak_languages().get(language, language)
    warnings.warn(f"Kokoro v1.0 was not trained on {name} ({language}): it is read with espeak-ng's "
                  "phonemes, expect a foreign accent", AudiocppWarning, stacklevel=3)


def ensure_ready(language: str = "en-us") -> str:
    """Imports and starts what ``language`` needs (espeak-ng's voice and letter names, or the Japanese
    dictionary) so that the first :func:`phonemize` is quick; returns the canonical code."""
    code = check_language(language)
    if code == "ja":
        from .japanese import warm_up

        warm_up()
        return code
    from . import espeak
    from .assemble import phonemize_pieces
    from .normalize import scan

    espeak.backend(code)
    espeak.letter_phonemes(code, "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    phonemize_pieces(scan("Ready 1.", code)[0], code)  # compiles the patterns, loads num2words
    return code


def phonemize(text: str, language: str | None = None) -> G2PResult:
    """``text`` as phoneme tokens in ``language`` (a code or alias; None: guessed from the text).

    Raises UsageError for an unknown language code, Chinese or Korean; ModelError when the G2P
    packages are missing. Warns (AudiocppWarning) for a language Kokoro was not trained on and for
    characters that could not be read.
    """
    if language is None:
        code, reason = detect_language(text)
        guessed = True
        if code in ("zh", "ko"):
            try:
                check_language(code)
            except UsageError as exc:
                raise UsageError(f"the text looks {'Chinese' if code == 'zh' else 'Korean'} ({reason}); "
                                 f"{exc.message}", hint=exc.hint) from None
        try:
            code = check_language(code)
        except UsageError:  # a script guess espeak-ng does not know: read as English
            code, reason = "en-us", f"{reason}, but espeak-ng has no such language: read as en-us"
    else:
        code = check_language(language)
        guessed, reason = False, f"language {code} as requested"
    if not is_trained(code):
        _untrained_warning(code)
    if code == "ja":
        from .japanese import tokens as japanese_tokens

        return G2PResult(code, guessed, reason, japanese_tokens(text))
    from .assemble import build_tokens, phonemize_pieces
    from .normalize import scan

    pieces, ignored = scan(text, code)
    if ignored:
        shown = " ".join(dict.fromkeys(ignored))
        warnings.warn(f"characters the {code} front end cannot read were skipped: {shown}",
                      AudiocppWarning, stacklevel=2)
    phonemes = phonemize_pieces(pieces, code)
    return G2PResult(code, guessed, reason, build_tokens(text, pieces, phonemes))
