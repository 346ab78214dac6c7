"""One written word -> what is said for it: words for espeak-ng, or letters to spell.

The spelling rule (initialisms and acronyms), in order:

* a word in capitals followed by ``s``/``'s`` ("CPUs", "GPU's") is the plural of what follows;
* in capitals (two letters or more): read as a word when it is one of a few known short acronyms
  (RAM, GIF, OK, ...); else spelled letter by letter when it has at most three letters, has no vowel
  (a e i o u y) or is a known initialism (HTTP, IEEE, ...); else (four letters or more, with vowels,
  e.g. NASA, JSON) read as a word. In text written all in capitals (three or more capital words, most
  of its words) capital words are words, and only common initialisms (CPU, TTS, USA, ...) and words
  without vowels are spelled;
* any other word without a vowel (two letters or more: "cpp", "tts", "km" without a number) is
  spelled, except interjections (hmm, shh, psst, ...); a lone consonant letter is spelled;
* ``camelCase`` and ``PascalCase`` words are read part by part ("OmniVoice" -> Omni Voice, "macOS" ->
  mac O S);
* a lower-case word ending in a letter-heavy technical suffix after a pronounceable part of three
  letters or more is read as that part plus the spelled suffix ("audiocpp" -> audio C P P, "nodejs" ->
  node J S, "mongodb" -> mongo D B);
* letters and digits together are read run by run ("MP3" -> M P three, "H2O" -> H two O); dotted
  single letters ("U.S.") are spelled; other dotted words are read with "dot" ("whisper.cpp");
  hyphenated words are kept whole for espeak unless a part needs one of the rules above.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, replace

from .lexicon import COMMON_INITIALISMS, INITIALISMS, INTERJECTIONS, TECH_SUFFIXES, WEB_WORDS, WORD_ACRONYMS
from .numbers import say_digits, say_int, words_for


@dataclass(frozen=True)
class Unit:
    """Something said: ``say`` words for espeak-ng (one word, no spaces), ``spell`` letters as one
    spelled word followed by the phonemes ``suffix`` (a plural's ``z``), or ``ps``: phonemes as they
    are."""

    kind: str  # "say" | "spell" | "ps"
    text: str
    suffix: str = ""


def say(words: str) -> list[Unit]:
    return [Unit("say", w) for w in words.split()]


def spell(letters: str, suffix: str = "") -> list[Unit]:
    return [Unit("spell", letters, suffix)]


@dataclass(frozen=True)
class WordContext:
    language: str
    shouting: bool = False
    part: bool = False  # a part of a compound ("setup.sh"): no interjections there

    @property
    def english(self) -> bool:
        return self.language.startswith("en")


def _is_vowel(ch: str) -> bool:
    base = unicodedata.normalize("NFD", ch)[0].lower()
    if base in "aeiouy":
        return True
    # letters of other scripts (Cyrillic, Greek, ...): never "unpronounceable" here
    return not ("a" <= base <= "z")


def has_vowel(word: str) -> bool:
    return any(_is_vowel(c) for c in word if c.isalpha())


_RUNS = re.compile(r"\d+|[^\W\d_]+(?:'[^\W\d_]+)*")
_CAPS_PLURAL = re.compile(r"([A-Z]{2,})('?s)")


def camel_parts(word: str) -> list[str]:
    """``word`` cut where a lower-case letter meets a capital, and before the last capital of a run
    that a lower-case letter follows ("HTTPServer" -> HTTP, Server; "macOS" -> mac, OS)."""
    parts: list[str] = []
    start = 0
    for i in range(1, len(word)):
        prev, ch, nxt = word[i - 1], word[i], word[i + 1] if i + 1 < len(word) else ""
        if (prev.islower() and ch.isupper()) or (prev.isupper() and ch.isupper() and nxt.islower()):
            parts.append(word[start:i])
            start = i
    parts.append(word[start:])
    return parts


def _web(ctx: WordContext):  # noqa: ANN202 - a WebWords
    return WEB_WORDS.get(ctx.language.split("-")[0], WEB_WORDS["en"])


def plural_suffix(letters: str, ctx: WordContext) -> str:
    """The phonemes of a spelled initialism's plural ending ("CPUs": z; "SOSs": ᵻz / ɪz)."""
    if letters[-1:].upper() in ("S", "X", "Z", "H"):
        return "ᵻz" if ctx.language == "en-us" else "ɪz"
    return "z"


def _spell_caps(word: str, ctx: WordContext) -> bool:
    if ctx.shouting:
        return word in COMMON_INITIALISMS or word in INITIALISMS or not has_vowel(word)
    if word in WORD_ACRONYMS:
        return False
    return len(word) <= 3 or not has_vowel(word) or word in INITIALISMS


def number_run(digits: str, ctx: WordContext) -> list[Unit]:
    """Digits inside a word ("MP3", "i7"): a number up to four digits, else digit by digit."""
    words = None
    if len(digits) <= 4 and not (len(digits) > 1 and digits.startswith("0")):
        words = say_int(int(digits), ctx.language)
    elif len(digits) <= 15:
        words = say_digits(digits, ctx.language)
    return say(words) if words else [Unit("say", digits)]


def word_units(word: str, ctx: WordContext) -> list[Unit]:
    """What is said for ``word`` (letters, digits, apostrophes, inner hyphens, dots and slashes)."""
    word = word.replace("’", "'")
    if any(c in word.strip("-") for c in "/-."):
        ctx = replace(ctx, part=True)
    if "/" in word:
        return [u for part in word.split("/") if part for u in word_units(part, ctx)]
    if "-" in word.strip("-"):
        parts = [p for p in word.split("-") if p]
        units = [word_units(p, ctx) for p in parts]
        if all(len(u) == 1 and u[0] == Unit("say", p) for u, p in zip(units, parts)):
            return [Unit("say", "-".join(parts))]  # espeak reads "well-known" best whole
        return [u for group in units for u in group]
    word = word.strip("-")
    if "." in word:
        parts = [p for p in word.split(".") if p]
        if parts and all(len(p) == 1 and p.isalpha() for p in parts):
            return spell("".join(parts))
        joiner = words_for(ctx.language).point if all(p.isdigit() for p in parts[1:]) else _web(ctx).dot
        out: list[Unit] = []
        for i, p in enumerate(parts):
            if i:
                out += say(joiner)
            out += word_units(p, ctx)
        return out
    if any(c.isdecimal() for c in word):  # decimal digits only: "¹" is a digit to str.isdigit, not to \d
        out = []
        for run in _RUNS.findall(word):
            if run.isdecimal():
                out += number_run(run, ctx)
            elif len(run) == 1:
                out += spell(run)
            elif run == word:  # nothing split off: read it as letters
                out += _letters(run, ctx)
            else:
                out += word_units(run, ctx)
        return out
    return _letters(word, ctx)


def _letters(word: str, ctx: WordContext) -> list[Unit]:
    plural = _CAPS_PLURAL.fullmatch(word)
    if plural and _spell_caps(plural.group(1), ctx) and not ctx.shouting:
        caps = plural.group(1)
        return spell(caps, plural_suffix(caps, ctx))
    letters = word.replace("'", "")
    if len(letters) >= 2 and letters.isupper():
        if _spell_caps(letters, ctx):
            return spell(letters)
        if letters in WORD_ACRONYMS or ctx.shouting:
            return [Unit("say", "okay" if letters == "OK" and ctx.english else word.lower())]
        return [Unit("say", word)]
    if len(letters) == 1:
        if letters in "aAI" or not letters.isascii() or _is_vowel(letters):
            return [Unit("say", word)]
        return spell(letters)
    parts = camel_parts(word) if "'" not in word and not re.match(r"(Mc|Mac)[A-Z]", word) else [word]
    if len(parts) > 1:
        return [u for part in parts for u in _letters(part, ctx)]
    lower = letters.lower()
    if lower in INTERJECTIONS and ctx.english and not ctx.part:
        return [Unit("ps", INTERJECTIONS[lower])]
    if not has_vowel(letters) and (ctx.part or lower not in INTERJECTIONS):
        return spell(letters)
    if word.islower():
        for suffix in TECH_SUFFIXES:
            head = lower[: -len(suffix)]
            if lower.endswith(suffix) and len(head) >= 3 and has_vowel(head):
                return [*_letters(head, ctx), *spell(suffix)]
    return [Unit("say", word)]
