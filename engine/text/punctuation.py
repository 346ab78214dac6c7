"""Punctuation tables and character classes shared by the chunkers.

The OmniVoice sets (``SPLIT_PUNCTUATION``, ``CLOSING_MARKS``, ``END_PUNCTUATION``,
``ABBREVIATIONS``) have exactly upstream's members (OmniVoice 0.2.1 ``utils/text.py``); the
parity tests compare them with the installed package.
"""

from __future__ import annotations

import unicodedata

# OmniVoice: a sentence ends after one of these ...
SPLIT_PUNCTUATION = frozenset(".,;:!?。，；：！？")
# ... and these, met right after such a split, stay with the sentence before.
CLOSING_MARKS = frozenset("\"'“”‘’）]》>」】")
# OmniVoice's add_punctuation leaves text ending in one of these alone ("……" is upstream's
# two-character entry; it can never equal the last character).
END_PUNCTUATION = frozenset({
    ";", ":", ",", ".", "!", "?", "…", ")", "]", "}", '"', "'", "“", "”", "‘", "’",
    "；", "：", "，", "。", "！", "？", "、", "……", "）", "】",
})
# Words ending in "." after which OmniVoice does not split (case-sensitive).
ABBREVIATIONS = frozenset({
    "Mr.", "Mrs.", "Ms.", "Dr.", "Prof.", "Sr.", "Jr.", "Rev.", "Fr.", "Hon.", "Pres.", "Gov.",
    "Capt.", "Gen.", "Sen.", "Rep.", "Col.", "Maj.", "Lt.", "Cmdr.", "Sgt.", "Cpl.", "Co.",
    "Corp.", "Inc.", "Ltd.", "Est.", "Dept.", "St.", "Ave.", "Blvd.", "Rd.", "Mt.", "Ft.", "No.",
    "Jan.", "Feb.", "Mar.", "Apr.", "Aug.", "Sep.", "Sept.", "Oct.", "Nov.", "Dec.", "i.e.",
    "e.g.", "vs.", "Vs.", "Etc.", "approx.", "fig.", "def.",
})

# General chunker: sentence ends, clause breaks, marks that close or open a phrase.
SENTENCE_END_WIDE = frozenset("。！？｡‼⁇⁈⁉")  # end a sentence even with no space after them
SENTENCE_END_SPACED = frozenset(".!?…")  # end a sentence before a space, a CJK character or the end
CLAUSE_BREAK_WIDE = frozenset("，、；：､﹐﹑﹔﹕—")
CLAUSE_BREAK_SPACED = frozenset(",;:")
CLOSERS = frozenset("\"'“”‘’»›)]}）］｝〕〉》」』】〗〙〛＂＇")


def add_punctuation(text: str) -> str:
    """OmniVoice's ``add_punctuation``: strip, then end with "." (or "。" when the text holds a
    CJK ideograph) unless it already ends in ``END_PUNCTUATION``."""
    text = text.strip()
    if not text or text[-1] in END_PUNCTUATION:
        return text
    return text + ("。" if any("\u4e00" <= char <= "\u9fff" for char in text) else ".")


def is_cjk(char: str) -> bool:
    """Scripts written without spaces between words, where any character boundary is a word
    boundary: CJK ideographs, kana, CJK symbols and full-width forms."""
    code = ord(char)
    return (
        0x3040 <= code <= 0x30FF  # hiragana, katakana
        or 0x3400 <= code <= 0x4DBF  # CJK extension A
        or 0x4E00 <= code <= 0x9FFF  # CJK unified ideographs
        or 0xF900 <= code <= 0xFAFF  # compatibility ideographs
        or 0x31F0 <= code <= 0x31FF  # katakana phonetic extensions
        or 0xFF66 <= code <= 0xFF9F  # half-width katakana
        or 0x20000 <= code <= 0x3134F  # extensions B-G
        or 0x3000 <= code <= 0x303F  # CJK symbols and punctuation
        or 0xFF01 <= code <= 0xFF65  # full-width forms
    )


def is_opening(char: str) -> bool:
    """Opening brackets and opening quotes: never end a piece with one."""
    return unicodedata.category(char) in ("Ps", "Pi")


def is_attached(char: str) -> bool:
    """Characters that belong to the character before them (a break never goes before one):
    combining marks, joiners, variation selectors, and punctuation other than opening marks."""
    if unicodedata.combining(char) or char in "\u200d\u200c" or 0xFE00 <= ord(char) <= 0xFE0F:
        return True
    category = unicodedata.category(char)
    return category.startswith("P") and category not in ("Ps", "Pi") or category in ("Mn", "Mc", "Me", "Sk")
