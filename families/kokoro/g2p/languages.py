"""Language codes: Kokoro's own, their aliases, espeak-ng's others, and guessing one from the text.

Kokoro v1.0 was trained on American and British English, Spanish, French, Hindi, Italian, Brazilian
Portuguese, Japanese and Mandarin (hexgrad's ``KPipeline.LANG_CODES``). All of them but Mandarin are
read here: English and the others through espeak-ng, Japanese through pyopenjtalk readings and
misaki's romanizer. Any other language espeak-ng knows is allowed with a warning (the model never heard
it). Mandarin needs misaki's Chinese G2P and Korean has none for Kokoro: both are clear errors.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from functools import lru_cache

from audiocpp.engine.errors import UsageError, did_you_mean

#: The languages Kokoro v1.0 was trained on that this front end reads, code -> name.
KOKORO_LANGUAGES: dict[str, str] = {
    "en-us": "American English",
    "en-gb": "British English",
    "es": "Spanish",
    "fr-fr": "French",
    "hi": "Hindi",
    "it": "Italian",
    "pt-br": "Brazilian Portuguese",
    "ja": "Japanese",
}

#: Other spellings -> a code. The one-letter codes are hexgrad's ``KPipeline`` codes (``ALIASES``).
ALIASES: dict[str, str] = {
    "a": "en-us", "en": "en-us", "en-us": "en-us", "english": "en-us", "american": "en-us",
    "american-english": "en-us", "us": "en-us",
    "b": "en-gb", "en-gb": "en-gb", "en-uk": "en-gb", "uk": "en-gb", "british": "en-gb",
    "british-english": "en-gb",
    "e": "es", "es": "es", "es-es": "es", "spanish": "es", "espanol": "es", "español": "es",
    "f": "fr-fr", "fr": "fr-fr", "fr-fr": "fr-fr", "french": "fr-fr", "francais": "fr-fr",
    "français": "fr-fr",
    "h": "hi", "hi": "hi", "hi-in": "hi", "hindi": "hi",
    "i": "it", "it": "it", "it-it": "it", "italian": "it", "italiano": "it",
    "p": "pt-br", "pt": "pt-br", "pt-br": "pt-br", "portuguese": "pt-br", "brazilian": "pt-br",
    "brazilian-portuguese": "pt-br", "português": "pt-br",
    "j": "ja", "ja": "ja", "ja-jp": "ja", "jp": "ja", "japanese": "ja", "日本語": "ja",
    "pt-pt": "pt",
}

#: Codes that mean Chinese or Korean (not readable here; see :func:`check_language`).
CHINESE = frozenset({"z", "zh", "zh-cn", "zh-tw", "zh-hk", "zh-hans", "zh-hant", "cmn", "cmn-latn-pinyin",
                     "yue", "hak", "chinese", "mandarin", "cantonese", "中文"})
KOREAN = frozenset({"ko", "ko-kr", "kr", "korean", "한국어"})


def _normal(code: str) -> str:
    return code.strip().lower().replace("_", "-")


@lru_cache(maxsize=1)
def espeak_languages() -> dict[str, str]:
    """espeak-ng's languages (code -> name), read from its data folder; empty without espeak."""
    from .espeak import language_list

    return language_list()


def _refuse_chinese(code: str) -> UsageError:
    return UsageError(
        f"language {code!r}: Chinese is not supported by audiocpp's Kokoro text front end (Kokoro's "
        "Mandarin phonemes come from misaki's Chinese G2P: jieba, pypinyin, cn2an and misaki[zh], "
        "which are not part of audiocpp)",
        hint="give the phonemes yourself with --phonemes, or choose another language with --language")


def _refuse_korean(code: str) -> UsageError:
    return UsageError(
        f"language {code!r}: Korean is not supported (Kokoro v1.0 was not trained on Korean and has no "
        "Korean G2P)", hint="choose another language with --language, or give phonemes with --phonemes")


def check_language(language: str) -> str:
    """The canonical code of ``language`` (an alias, a Kokoro code or an espeak-ng code), or a
    UsageError saying what is supported and which code was probably meant."""
    code = _normal(language)
    if not code:
        raise UsageError("empty language code", hint=f"use one of {', '.join(KOKORO_LANGUAGES)}")
    if code in CHINESE:
        raise _refuse_chinese(language)
    if code in KOREAN:
        raise _refuse_korean(language)
    if code in ALIASES:
        return ALIASES[code]
    espeak = espeak_languages()
    lowered = {c.lower(): c for c in espeak}
    if code in lowered:
        return lowered[code]
    names = {name.lower(): c for c, name in espeak.items()}
    if code in names:
        return names[code]
    if not espeak:
        from .espeak import missing_espeak_error

        missing = missing_espeak_error()
        if missing is not None:
            raise UsageError(f"unknown language {language!r} (espeak-ng, which knows more languages, is not "
                             "available)", hint=f"use one of {', '.join(KOKORO_LANGUAGES)}; {missing.hint}")
    candidates = list(dict.fromkeys([*KOKORO_LANGUAGES, *ALIASES, *lowered, *names]))
    raise UsageError(
        f"unknown language {language!r}",
        hint=f"{did_you_mean(code, candidates)}Kokoro's languages: {', '.join(KOKORO_LANGUAGES)} "
             "(also a, b, e, f, h, i, p, j); "
             "any other espeak-ng language code works too (untrained), e.g. de, nl, ru, pl")


def is_trained(code: str) -> bool:
    return code in KOKORO_LANGUAGES


# -- guessing -------------------------------------------------------------------------------------

_SCRIPTS: tuple[tuple[str, str, str], ...] = (
    # (regex class, script name, language)
    ("\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f", "kana", "ja"),
    ("\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff", "Han", "zh"),
    ("\u1100-\u11ff\u3130-\u318f\uac00-\ud7af", "Hangul", "ko"),
    ("\u0900-\u097f", "Devanagari", "hi"),
    ("\u0400-\u04ff", "Cyrillic", "ru"),
    ("\u0370-\u03ff", "Greek", "el"),
    ("\u0590-\u05ff", "Hebrew", "he"),
    ("\u0600-\u06ff", "Arabic", "ar"),
    ("\u0980-\u09ff", "Bengali", "bn"),
    ("\u0b80-\u0bff", "Tamil", "ta"),
    ("\u0e00-\u0e7f", "Thai", "th"),
    ("\u10a0-\u10ff", "Georgian", "ka"),
    ("\u0530-\u058f", "Armenian", "hy"),
    ("A-Za-z\u00c0-\u024f", "Latin", "en-us"),
)
_SCRIPT_RES = tuple((re.compile(f"[{chars}]"), name, lang) for chars, name, lang in _SCRIPTS)

def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Frequent short words, a few distinctive letters: enough to tell these languages apart in a
#: sentence or two. Scores are counts of such words (letters count double).
_STOPWORDS: dict[str, frozenset[str]] = {
    "en-us": _words(
        "the and is are was were of to in that it you he she they we with for on this have has "
        "not be at by from or but what which there their an will would can"
    ),
    "fr-fr": _words(
        "le la les des est et un une du je vous il elle nous pas que qui dans pour avec ce c'est "
        "sur au aux mais ou où sont été être cette ces mon ton son très bien"
    ),
    "es": _words(
        "el la los las es y de que en un una por para con no se del está son al lo como pero más "
        "muy yo tú él ella su sus hay fue ser estar este esta"
    ),
    "it": _words(
        "il lo la gli le è e di che un una per non con sono del della nel nella mi ti ci come ma "
        "più molto io tu lui lei questo questa anche"
    ),
    "pt-br": _words(
        "o a os as é e de que um uma não com para do da em no na são você eu ele ela mas mais "
        "muito como isso este esta foi ser estar pelo pela"
    ),
    "de": _words(
        "der die das und ist ein eine nicht ich zu mit den auf für sie es dem des im sind war "
        "auch aber wie noch nur wir ihr er hat haben"
    ),
}
_LETTERS: dict[str, str] = {
    "fr-fr": "œçêîûëïèàù",
    "es": "ñ¿¡áíóú",
    "it": "èìòàù",
    "pt-br": "ãõçâêôáéíóú",
    "de": "ßäöü",
}
_NAMES = {"en-us": "English", "fr-fr": "French", "es": "Spanish", "it": "Italian", "pt-br": "Portuguese",
          "de": "German"}
_WORD_RE = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")


def _guess_latin(text: str) -> tuple[str, str]:
    words = [w.lower() for w in _WORD_RE.findall(text.replace("’", "'"))]
    lowered = text.lower()
    scores: Counter[str] = Counter()
    evidence: dict[str, list[str]] = {lang: [] for lang in _STOPWORDS}
    for w in words:
        for lang, stop in _STOPWORDS.items():
            if w in stop:
                scores[lang] += 1
                if w not in evidence[lang]:
                    evidence[lang].append(w)
    for lang, letters in _LETTERS.items():
        found = [c for c in letters if c in lowered]
        scores[lang] += 2 * sum(lowered.count(c) for c in found)
        evidence[lang].extend(found)
    ranked = scores.most_common()
    if ranked and ranked[0][0] != "en-us":
        best, score = ranked[0]
        second = ranked[1][1] if len(ranked) > 1 else 0
        if score >= 3 and score >= 2 * second:
            shown = ", ".join(evidence[best][:4])
            return best, (f"guessed {best} ({_NAMES[best]}) from its words and letters ({shown}); "
                          "pass --language to choose")
    return "en-us", "guessed en-us from the Latin script; pass --language to choose"


def detect_language(text: str) -> tuple[str, str]:
    """A language for ``text`` from its script (and, for Latin, a few frequent words), with the reason
    as a sentence. Kana means Japanese; Han without kana Chinese; Hangul Korean."""
    counts: Counter[str] = Counter()
    langs: dict[str, str] = {}
    for ch in text:
        if not unicodedata.category(ch).startswith("L"):
            continue
        for pattern, name, lang in _SCRIPT_RES:
            if pattern.match(ch):
                counts[name] += 1
                langs[name] = lang
                break
    if not counts:
        return "en-us", "no letters to tell the language from: guessed en-us; pass --language to choose"
    if counts["kana"]:
        counts["kana"] += counts.pop("Han", 0)
    script, _ = counts.most_common(1)[0]
    if script == "Latin":
        return _guess_latin(text)
    if script == "kana":
        return "ja", "guessed ja from the kana in the text; pass --language to choose"
    return langs[script], f"guessed {langs[script]} from the {script} script; pass --language to choose"
