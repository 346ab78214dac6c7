"""espeak-ng through ``phonemizer``: one backend per language, one lock for the whole process.

The library is the one bundled by the ``espeakng-loader`` wheel (with its data) when it is installed,
else whatever ``phonemizer`` finds on the system (``PHONEMIZER_ESPEAK_LIBRARY`` or the system's
libespeak-ng). espeak-ng keeps global state, so every call into it holds :data:`LOCK`.

espeak's IPA is rewritten into the symbols Kokoro was trained with, as hexgrad's misaki does
(``misaki.espeak``): English as its ``EspeakFallback`` (diphthongs as the single letters ``A I O W Y
Q``, affricates ``ʤ ʧ``, ``ɚ`` as ``əɹ``, syllabic consonants with ``ᵊ``, American length marks
dropped), the other languages as its ``EspeakG2P`` (tied diphthongs and affricates to one symbol,
remaining ties and hyphens removed). Added here: English ``ɹɹ`` (from ``ɚɹ`` and ``ʊ^ɹɹ``) is one
``ɹ``, and British ``e^ə``/``i^ə``/``ə^ʊ`` are rewritten before the general map (upstream's order turns
the ``e`` of ``e^ə`` into ``A`` first, so its ``ɛː`` rule never fires).
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from typing import Any

from audiocpp.engine.errors import ModelError

#: Held around every call into espeak-ng (process-global state).
LOCK = threading.RLock()
#: The tie phonemizer puts between the parts of a multi-letter phoneme (then rewritten or removed).
TIE = "^"

_INSTALL_HINT = "pip install espeakng-loader phonemizer-fork"

# espeak -> Kokoro (misaki) for English; longest first so that "ʔn̩" wins over "ʔ".
_EN_MAP: tuple[tuple[str, str], ...] = tuple(sorted({
    "ʔˌn\u0329": "tn", "ʔn\u0329": "tn", "ʔn": "tn", "ʔ": "t",
    "a^ɪ": "I", "a^ʊ": "W", "d^ʒ": "ʤ", "e^ɪ": "A", "e": "A", "t^ʃ": "ʧ", "ɔ^ɪ": "Y",
    "ə^l": "ᵊl", "ʲo": "jo", "ʲə": "jə", "ʲ": "", "ɚ": "əɹ", "r": "ɹ", "x": "k", "ç": "k",
    "ɐ": "ə", "ɬ": "l", "\u0303": "",
}.items(), key=lambda kv: -len(kv[0])))
# espeak -> Kokoro for the other languages (all of one length: order does not matter).
_OTHER_MAP: tuple[tuple[str, str], ...] = (
    ("a^ɪ", "I"), ("a^ʊ", "W"), ("d^z", "ʣ"), ("d^ʒ", "ʤ"), ("e^ɪ", "A"), ("o^ʊ", "O"), ("ə^ʊ", "Q"),
    ("s^s", "S"), ("t^s", "ʦ"), ("t^ʃ", "ʧ"), ("ɔ^ɪ", "Y"),
)
_SYLLABIC = re.compile(r"(\S)\u0329")


def postprocess(language: str, ps: str) -> str:
    """espeak's phonemes for ``language`` in Kokoro's symbols."""
    if language.startswith("en"):
        british = language != "en-us" and not language.startswith("en-us")
        if british:  # before the general map, which would turn the "e" of "e^ə" into "A"
            ps = ps.replace("e^ə", "ɛː").replace("i^ə", "ɪə").replace("iə", "ɪə").replace("ə^ʊ", "Q")
        for old, new in _EN_MAP:
            ps = ps.replace(old, new)
        ps = _SYLLABIC.sub(r"ᵊ\1", ps).replace("\u0329", "")
        if not british:
            ps = ps.replace("o^ʊ", "O").replace("ɜːɹ", "ɜɹ").replace("ɜː", "ɜɹ").replace("ɪə", "iə")
            ps = ps.replace("ː", "")
        ps = ps.replace("o", "ɔ")  # a bare o is espeak < 1.52's spelling of ɔ
        # "century" sˈɛntʃɚɹi, "euro" jˈʊ^ɹɹoʊ: one ɹ once ɚ is əɹ and the tie is gone (not upstream's)
        return re.sub("ɹɹ+", "ɹ", ps.replace(TIE, ""))
    for old, new in _OTHER_MAP:
        ps = ps.replace(old, new)
    return ps.replace(TIE, "").replace("-", "")


def _configure() -> str:
    """Points phonemizer at espeakng-loader's library and data (once); returns a description."""
    from phonemizer.backend.espeak.wrapper import EspeakWrapper

    try:
        import espeakng_loader
    except ImportError:
        return "the system's libespeak-ng"
    if not EspeakWrapper._ESPEAK_LIBRARY:  # someone else's choice stays
        EspeakWrapper.set_library(espeakng_loader.get_library_path())
        EspeakWrapper.set_data_path(espeakng_loader.get_data_path())
    return f"espeakng-loader's libespeak-ng ({espeakng_loader.get_library_path()})"


@lru_cache(maxsize=1)
def _setup() -> str:
    with LOCK:
        return _load()


def _load() -> str:
    try:
        import phonemizer.backend  # noqa: F401
    except ImportError as exc:
        raise ModelError("the Kokoro text front end needs espeak-ng through phonemizer, which is not "
                         f"installed ({exc})", hint=_INSTALL_HINT) from None
    where = _configure()
    from phonemizer.backend import EspeakBackend

    try:
        if not EspeakBackend.is_available():
            raise RuntimeError("espeak-ng not found")
        EspeakBackend.version()
    except Exception as exc:  # phonemizer raises RuntimeError when no library loads
        raise ModelError(f"espeak-ng could not be loaded from {where} ({exc})", hint=_INSTALL_HINT) from None
    return where


def missing_espeak_error() -> ModelError | None:
    """The error :func:`backend` would raise, or None when espeak-ng is usable."""
    try:
        _setup()
    except ModelError as exc:
        return exc
    return None


def language_list() -> dict[str, str]:
    """espeak-ng's languages, code -> name; empty when espeak-ng is not available."""
    if missing_espeak_error() is not None:
        return {}
    from phonemizer.backend import EspeakBackend

    with LOCK:
        return dict(EspeakBackend.supported_languages())


_BACKENDS: dict[str, Any] = {}


def backend(language: str) -> Any:
    """phonemizer's EspeakBackend for ``language`` (made once, kept)."""
    with LOCK:
        made = _BACKENDS.get(language)
        if made is None:
            _setup()
            from phonemizer.backend import EspeakBackend

            made = EspeakBackend(language, with_stress=True, tie=TIE, language_switch="remove-flags",
                                 preserve_punctuation=False)
            _BACKENDS[language] = made
        return made


def phonemize_lines(language: str, lines: list[str]) -> list[str]:
    """Each line's phonemes (words separated by one space), in Kokoro's symbols."""
    if not lines:
        return []
    engine = backend(language)
    from phonemizer.separator import Separator

    with LOCK:
        raw = engine.phonemize(lines, separator=Separator(word=" ", phone="", syllable=""), strip=True,
                               njobs=1)
    if len(raw) != len(lines):  # pragma: no cover - phonemizer keeps one output per line
        raise ModelError(f"espeak-ng returned {len(raw)} lines for {len(lines)}")
    return [" ".join(postprocess(language, line).split()) for line in raw]


_LETTERS: dict[str, dict[str, str]] = {}


def letter_phonemes(language: str, letters: str) -> list[str]:
    """The phonemes of each letter's name in ``language`` (each letter spoken alone, upper case)."""
    with LOCK:
        table = _LETTERS.setdefault(language, {})
        missing = [c for c in dict.fromkeys(letters.upper()) if c not in table]
        if missing:
            for c, ps in zip(missing, phonemize_lines(language, missing)):
                table[c] = ps.replace(" ", "")
        return [table[c] for c in letters.upper()]


def spell(language: str, letters: str) -> str:
    """``letters`` spelled as one word, as espeak spells an initialism: every letter's stress made
    secondary but the last one's ("CPU" -> ``sˌipˌijˈu``)."""
    names = letter_phonemes(language, letters)
    if not names:
        return ""
    head = [n.replace("ˈ", "ˌ") for n in names[:-1]]
    return "".join([*head, names[-1]])
