"""Numbers as words, per language, through ``num2words`` (imported on first use).

``say_*`` functions return plain words (no commas; hyphens kept, as in "twenty-one") or None where
the language has no converter, in which case the digits are left for espeak-ng to read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

# audiocpp language code -> num2words language
_NUM2WORDS = {
    "en-us": "en", "en-gb": "en", "es": "es", "fr-fr": "fr", "it": "it", "pt-br": "pt_BR", "pt": "pt",
    "de": "de", "nl": "nl", "pl": "pl", "ru": "ru", "uk": "uk", "cs": "cs", "sk": "sk", "sv": "sv",
    "da": "da", "nb": "no", "fi": "fi", "hu": "hu", "ro": "ro", "tr": "tr", "id": "id", "ca": "ca",
    "lt": "lt", "lv": "lv", "sl": "sl", "sr": "sr", "he": "he", "ar": "ar", "fa": "fa", "vi": "vi",
    "is": "is", "cy": "cy", "eo": "eo", "bn": "bn", "kn": "kn", "te": "te", "th": "th", "az": "az",
    "be": "be", "am": "am", "kk": "kz", "tg": "tg", "fr-be": "fr_BE", "fr-ch": "fr_CH", "es-419": "es",
}


@dataclass(frozen=True)
class Words:
    """The few words number reading needs besides the numbers themselves."""

    point: str  # decimal separator spoken
    percent: str
    minus: str
    decimal_comma: bool  # "3,5" is three and a half; "1.000" a thousand


_WORDS: dict[str, Words] = {
    "en": Words("point", "percent", "minus", False),
    "es": Words("coma", "por ciento", "menos", True),
    "fr": Words("virgule", "pour cent", "moins", True),
    "it": Words("virgola", "per cento", "meno", True),
    "pt": Words("vírgula", "por cento", "menos", True),
    "de": Words("Komma", "Prozent", "minus", True),
    "nl": Words("komma", "procent", "min", True),
    "pl": Words("przecinek", "procent", "minus", True),
    "ru": Words("запятая", "процентов", "минус", True),
}
_DEFAULT_WORDS = Words("", "%", "-", True)


def num2words_language(language: str) -> str | None:
    return _NUM2WORDS.get(language) or _NUM2WORDS.get(language.split("-")[0])


def words_for(language: str) -> Words:
    lang = num2words_language(language) or ""
    return _WORDS.get(lang.split("_")[0], _WORDS["en"] if language.startswith("en") else _DEFAULT_WORDS)


@lru_cache(maxsize=1)
def _num2words() -> Any:
    from num2words import num2words

    return num2words


def _clean(words: str) -> str:
    return " ".join(re.sub(r"[,]", " ", words).split())


def say_int(n: int, language: str, to: str = "cardinal") -> str | None:
    """``n`` in words (``to``: cardinal, ordinal, year), or None without a converter."""
    lang = num2words_language(language)
    if lang is None:
        return None
    try:
        words = _num2words()(n, lang=lang, to=to)
    except (NotImplementedError, OverflowError, ValueError, TypeError, AttributeError, KeyError):
        if to == "cardinal":
            return None
        return say_int(n, language)
    if lang == "en" and language == "en-us" and to != "year":
        words = words.replace(" and ", " ")  # American: "one hundred one"
    return _clean(words)


def say_digits(digits: str, language: str) -> str | None:
    """Each digit in words ("05" -> "zero five")."""
    out = [say_int(int(d), language) for d in digits]
    if any(w is None for w in out):
        return None
    return " ".join(w for w in out if w)


def say_decimal(integer: str, fraction: str | None, language: str, negative: bool = False) -> str | None:
    """A number written with digits (thousands separators already removed): "3", "14" ->
    "three point one four" (the fraction digit by digit)."""
    whole = say_int(int(integer or "0"), language)
    if whole is None:
        return None
    words = words_for(language)
    parts = [words.minus] if negative else []
    parts.append(whole)
    if fraction:
        digits = say_digits(fraction, language)
        if digits is None or not words.point:
            return None
        parts += [words.point, digits]
    return " ".join(parts)


def plural_of_number_words(words: str) -> str:
    """"nineteen ninety" -> "nineteen nineties" (English decades and "the 1900s")."""
    head, _, last = words.rpartition(" ")
    if last.endswith("y"):
        last = last[:-1] + "ies"
    elif last.endswith("x"):
        last += "es"
    else:
        last += "s"
    return f"{head} {last}".strip()
