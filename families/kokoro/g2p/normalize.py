"""Text -> pieces: each word, number expression or punctuation mark of the input with its span in the
original text and what is said for it (normalisation before G2P).

Rules (English; the other espeak languages get the number, currency, percent, symbol and web rules
with their own words where listed in :mod:`.lexicon`, and leave the rest to espeak-ng):

* numbers: ``1,234`` one thousand two hundred thirty-four; ``3.14`` three point one four; ``-5`` minus
  five; ``007`` and numbers over 15 digits digit by digit; a four-digit number from 1100 to 2099
  (no separator) is a year (``1999`` nineteen ninety-nine); ``1990s`` / ``'90s`` decades; ``21st``
  ordinals; a number of 1-31 next to a month name is an ordinal (``March 5`` March fifth); ``10-20``
  ten to twenty; ``1/2`` one half (small fractions), else ``24/7`` twenty-four seven; versions
  ``1.2.3`` one point two point three; phone-like ``555-1234`` digit by digit;
* currency: ``$3.50`` three dollars fifty cents, ``$1`` one dollar, ``$0.99`` ninety-nine cents,
  ``$5M``/``$5 million`` five million dollars, ``€``, ``£`` (pence), ``¥``, ``₹``; ``3,50 €`` too;
* ``50%`` fifty percent; units after a number (``5 km`` five kilometers, ``1 kg`` one kilogram,
  ``20°C`` twenty degrees Celsius, ``3 GB``, ``10x`` ten times; British spelling for en-gb);
* times ``3:30 pm`` three thirty P M, ``3:05`` three oh five, ``3:00`` three o'clock, ``3pm``;
  dates ``2024-03-05`` and ``3/5/2024`` (month first for en-us, day first otherwise);
* abbreviations: Mr. Mrs. Ms. Dr. Prof. Mt. Jr. Sr. vs. etc. e.g. i.e. approx. No. 5, Fig., Inc.,
  Ltd., St. (Saint before a capitalised word, else Street), months (Jan. ...); the period of an
  abbreviation that ends a sentence ("... etc. The") is kept as a full stop;
* symbols ``& + @ = % ° × ±`` and ``#5`` (number five) in words; URLs (scheme dropped, "dot" and
  "slash") and e-mail addresses ("at", "dot");
* words: initialisms and other spellings as in :mod:`.words`;
* punctuation to Kokoro's symbols: ``...`` -> ``…``; ``--``, spaced ``-`` and ``–`` -> ``—``;
  ``"`` -> ``“``/``”`` by position; ``«»„`` -> ``“”``; brackets -> ``()``; ``。、！？`` -> ``.,!?``;
  repeated marks collapse (``!!!`` -> ``!``); ``¡ ¿`` and quotes inside words are dropped; other
  characters that are not letters (emoji, ``*``, ``_``) separate words and are reported as ignored.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from .lexicon import (
    ABBREVIATIONS,
    ENGLISH_ABBREVIATIONS,
    ROMAN_CARDINAL_AFTER,
    ROMAN_ORDINAL_AFTER,
    SYMBOL_WORDS,
    WEB_WORDS,
)
from .numbers import say_int, words_for
from .readings import Piece, Reader
from .words import Unit, WordContext, say, spell, word_units

_TRANSLATE = str.maketrans({"。": ".", "、": ",", "！": "!", "？": "?", "，": ",", "：": ":", "；": ";",
                            "（": "(", "）": ")", "「": "“", "」": "”", "『": "“", "』": "”", "〜": "—",
                            "～": "—", "‒": "—", "―": "—", "−": "-", "\u00a0": " ", "\u202f": " ",
                            "\u2009": " ", "\u3000": " ", "।": ".", "॥": ".",
                            "؟": "?", "،": ",", "؛": ";"})



@lru_cache(maxsize=1)
def _marks() -> str:
    """A regex class body of the combining marks of the BMP (Devanagari vowel signs, accents...),
    which ``\\w`` does not match but which belong to words."""
    ranges: list[str] = []
    start = None
    for cp in range(0x10001):
        is_mark = cp < 0x10000 and unicodedata.category(chr(cp)).startswith("M")
        if is_mark and start is None:
            start = cp
        elif not is_mark and start is not None:
            ranges.append(f"\\u{start:04x}-\\u{cp - 1:04x}" if cp - 1 > start else f"\\u{start:04x}")
            start = None
    return "".join(ranges)


def _compound() -> str:
    inner = rf"[\w'’{_marks()}]"
    word = rf"[^\W_](?:{inner}*(?:[^\W_]|[{_marks()}]))?"
    return rf"{word}(?:[-./]{word})*"


def _number_parts(decimal_comma: bool) -> tuple[str, str]:
    if decimal_comma:  # "1.000" a thousand, "3,5" and "3.5" three and a half
        return r"\d{1,3}(?:[. ]\d{3})+(?!\d)|\d+", r"[,.](?P<dec>\d+)"
    return r"\d{1,3}(?:,\d{3})+(?!\d)|\d+", r"\.(?P<dec>\d+)"


@lru_cache(maxsize=2)
def _number_pattern(decimal_comma: bool) -> re.Pattern[str]:
    integer, frac = _number_parts(decimal_comma)
    return re.compile(rf"(?P<sign>(?<![\w.,])[-−])?(?P<int>{integer})(?:{frac})?")


@lru_cache(maxsize=2)
def _pattern(decimal_comma: bool) -> re.Pattern[str]:
    integer, frac = _number_parts(decimal_comma)
    money_int = integer
    return re.compile(rf"""
     (?P<url>(?:https?://|www\.)[^\s<>"“”]+)
    |(?P<email>[\w.+-]+@[\w-]+(?:\.[\w-]+)+)
    |(?P<money>(?P<cur>R\$|[$€£¥₹])\s?(?P<mint>{money_int})(?:[.,](?P<mfrac>\d{{1,2}})(?!\d))?
        (?:\s?(?P<mscale>thousand|million|billion|trillion|bn|[kKmMbB])(?![\w]))?)
    |(?P<money2>(?P<m2int>{money_int})(?:[.,](?P<m2frac>\d{{1,2}})(?!\d))?\s?(?P<cur2>[€$£¥]))
    |(?P<time>(?P<th>\d{{1,2}}):(?P<tm>\d{{2}})(?::(?P<ts>\d{{2}}))?(?![\d:])
        (?:\s?(?P<tap>[aApP])\.?\s?[mM]\b\.?)?)
    |(?P<hour>(?P<hh>\d{{1,2}})\s?(?P<hap>[aApP])\.?[mM]\b\.?)
    |(?P<iso>(?P<iy>\d{{4}})-(?P<imo>\d{{2}})-(?P<id>\d{{2}}))(?!\d)
    |(?P<sdate>(?P<sa>\d{{1,2}})(?:/(?P<sb>\d{{1,2}})/(?P<sc>\d{{4}}|\d{{2}})(?![\d/])
        |\.(?P<sb2>\d{{1,2}})\.(?P<sc2>\d{{4}})(?!\.?\d)))
    |(?P<version>\d+(?:\.\d+){{2,}})(?!\.?\d)
    |(?P<phone>\d{{3}}[-.]\d{{3,4}}(?:[-.]\d{{4}})?)(?![\d])
    |(?P<range>(?P<r1>\d+)\s?[-–]\s?(?P<r2>\d+))(?![\d-]|[.,]\d)
    |(?P<frac>(?P<fa>\d{{1,3}})/(?P<fb>\d{{1,3}}))(?![\d/])
    |(?P<num>(?P<sign>(?<![\w.,])[-−])?(?P<int>{integer})(?:{frac})?)
    |(?P<decade>['’](?P<dd>\d0)s)\b
    |(?P<word>{_compound()})
    |(?P<ellipsis>\.{{2,}}|…+|(?:\.\s){{2,}}\.)
    |(?P<punct>[!?]+|[.,;:]|—+|–|-{{2,}}|(?<=\s)-(?=\s))
    |(?P<quote>["“”«»„‟])
    |(?P<paren>[()\[\]{{}}])
    |(?P<symbol>[&+@%=#°×~±/\\*_|^<>$€£¥₹])
    |(?P<other>\S)
    """, re.X)




_ROMAN = re.compile(r"(?=[MDCLXVI])M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})")
_ROMAN_VALUES = {"M": 1000, "D": 500, "C": 100, "L": 50, "X": 10, "V": 5, "I": 1}


def _roman_value(numeral: str) -> int:
    total = 0
    for ch, nxt in zip(numeral, [*numeral[1:], ""]):
        value = _ROMAN_VALUES[ch]
        total += -value if nxt and _ROMAN_VALUES[nxt] > value else value
    return total


_DOTTED = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")


def _lang2(language: str) -> str:
    return language.split("-")[0]


class Scanner(Reader):
    """Walks a text once, left to right, producing :class:`Piece` records."""

    def __init__(self, text: str, language: str) -> None:
        self.text = text.translate(_TRANSLATE)  # one character for one: offsets stay valid
        self.language = language
        self.english = language.startswith("en")
        self.lang = _lang2(language)
        self.words = words_for(language)
        self.pattern = _pattern(self.words.decimal_comma)
        self.number_pattern = _number_pattern(self.words.decimal_comma)
        letters = re.findall(r"[^\W\d_]{2,}", self.text)
        caps = [w for w in letters if w.isupper()]
        self.ctx = WordContext(language, shouting=len(caps) >= 3 and len(caps) >= 0.6 * len(letters))
        self.pieces: list[Piece] = []
        self.ignored: list[str] = []

    # -- helpers -------------------------------------------------------------------------------
    # -- the walk ------------------------------------------------------------------------------
    def run(self) -> list[Piece]:
        pos, text = 0, self.text
        while pos < len(text):
            if text[pos].isspace():
                pos += 1
                continue
            m = self.pattern.match(text, pos)
            assert m is not None and m.lastgroup is not None  # "other" matches any non-space
            end = getattr(self, f"_{m.lastgroup}")(m)
            pos = max(end, m.start() + 1)
        return self.pieces

    # -- handlers: each adds pieces and returns where scanning goes on ---------------------------
    def _url(self, m: re.Match[str]) -> int:
        raw = m.group().rstrip(".,;:!?)]}'\"")
        start, end = m.start(), m.start() + len(raw)
        body = re.sub(r"^https?://", "", raw)
        web = WEB_WORDS.get(self.lang, WEB_WORDS["en"])
        units: list[Unit] = []
        for i, part in enumerate(re.split(r"([./])", body)):
            if part == ".":
                units += say(web.dot)
            elif part == "/":
                if i < len(re.split(r"([./])", body)) - 1:
                    units += say(web.slash)
            elif part:
                for sub in re.findall(r"[^\W_]+", part):
                    units += spell(sub) if sub.lower() == "www" else word_units(sub, self.ctx)
        self.add(start, end, units)
        return end

    def _email(self, m: re.Match[str]) -> int:
        web = WEB_WORDS.get(self.lang, WEB_WORDS["en"])
        local, _, domain = m.group().partition("@")
        names = {".": web.dot, "-": web.dash, "_": web.underscore, "+": web.plus}
        units: list[Unit] = []
        for part in re.split(r"([._+-])", local):
            if part in names:
                units += say(names[part])
            elif part:
                units += word_units(part, self.ctx)
        units += say(web.at)
        for i, part in enumerate(domain.split(".")):
            if i:
                units += say(web.dot)
            units += word_units(part, self.ctx)
        self.add(m.start(), m.end(), units)
        return m.end()

    def _word(self, m: re.Match[str]) -> int:
        word, start, end = m.group(), m.start(), m.end()
        if self.english or self.lang in ABBREVIATIONS:
            done = self._abbreviation(word, start, end)
            if done is not None:
                return done
        if self.english:
            roman = self._roman(word)
            if roman is not None:
                self.add(start, end, say(roman))
                return end
        if _DOTTED.fullmatch(word) and self.text[end:end + 1] == ".":
            # "U.S.": the last period belongs to it; a full stop too only at the end of the text
            self.add(start, end + 1, word_units(word, self.ctx))
            if not self.text[end + 1:].strip():
                self.add_punct(end, end + 1, ".")
                self.pieces[-2].end = end
            return end + 1
        self.add(start, end, word_units(word, self.ctx))
        return end

    def _roman(self, word: str) -> str | None:
        """A Roman numeral after a name ("Henry VIII": the eighth) or a part word ("World War II":
        two); None when ``word`` is not read so."""
        if not _ROMAN.fullmatch(word) or word == "I":
            return None
        prev = self._prev_word()
        value = _roman_value(word)
        if prev in ROMAN_ORDINAL_AFTER:
            ordinal = say_int(value, self.language, "ordinal")
            return f"the {ordinal}" if ordinal else None
        if prev in ROMAN_CARDINAL_AFTER:
            return self.cardinal(value)
        return None

    def _abbreviation(self, word: str, start: int, end: int) -> int | None:
        key = word.lower().replace("’", "'")
        period = self.text[end:end + 1] == "."
        after = self.text[end + 1 if period else end:]
        next_word = re.match(r"\s*(\S)", after)
        next_char = next_word.group(1) if next_word else ""
        if key == "st" and (period or word == "St") and self.english:
            title = next_char.isupper()
            expansion, may_end = ("Saint" if title else "Street"), not title
        else:
            table = ENGLISH_ABBREVIATIONS if self.english else ABBREVIATIONS[self.lang]
            abbr = table.get(key)
            if abbr is None:
                return None
            if abbr.needs_period and not period:
                return None
            if abbr.needs_number and not next_char.isdigit():
                return None
            if self.english and key in ("no", "ch") and word.islower():
                return None
            expansion, may_end = abbr.words, abbr.may_end
        units = say(expansion)
        if expansion in ("A M", "P M", "P H D"):
            units = spell(expansion.replace(" ", ""))
        if not period:
            self.add(start, end, units)
            return end
        # the period: part of the abbreviation; also a full stop when a sentence ends there
        ends_sentence = may_end and (not next_char or next_char.isupper())
        if ends_sentence:
            self.add(start, end, units)
            self.add_punct(end, end + 1, ".")
        else:
            self.add(start, end + 1, units)
        return end + 1

    def _ellipsis(self, m: re.Match[str]) -> int:
        self.add_punct(m.start(), m.end(), "…")
        return m.end()

    def _punct(self, m: re.Match[str]) -> int:
        mark, start = m.group(), m.start()
        before = self.text[start - 1] if start else " "
        after = self.text[m.end():m.end() + 1]
        glued = (before.isspace() or before in "([{“\"'") and after.isalpha()
        if mark == "." and glued:  # ".venv", ".cache": the dot of a hidden file is said
            self.add(start, m.end(), say(WEB_WORDS.get(self.lang, WEB_WORDS["en"]).dot))
            return m.end()
        if mark.startswith("-") and glued:  # "--model": a command-line flag's dashes are not read
            return m.end()
        if mark[0] in "-–—":
            mark = "—"
        elif mark[0] in "!?":
            mark = "".join(dict.fromkeys(mark))  # "!!!" -> "!", "?!" stays
        self.add_punct(m.start(), m.end(), mark)
        return m.end()

    def _quote(self, m: re.Match[str]) -> int:
        ch, pos = m.group(), m.start()
        if ch == '"':
            before = self.text[pos - 1] if pos else " "
            ch = "“" if before.isspace() or before in "([{“—" else "”"
        mark = {"«": "“", "„": "“", "‟": "“", "»": "”"}.get(ch, ch)
        self.add_punct(pos, m.end(), mark)
        return m.end()

    def _paren(self, m: re.Match[str]) -> int:
        self.add_punct(m.start(), m.end(), "(" if m.group() in "([{" else ")")
        return m.end()

    def _symbol(self, m: re.Match[str]) -> int:
        ch, start = m.group(), m.start()
        rest = self.text[m.end():]
        table = SYMBOL_WORDS.get(self.lang, {})
        if ch == "#" and self.english:
            if re.match(r"\d", rest):
                self.add(start, m.end(), say("number"))
            return m.end()  # "#tag": the hash is not read
        if ch == "~" and re.match(r"\s?\d", rest) and self.english:
            self.add(start, m.end(), say("about"))
            return m.end()
        if ch in table:
            self.add(start, m.end(), say(table[ch]))
        elif ch not in "/\\*_|^~":
            self.ignored.append(ch)
        return m.end()

    def _other(self, m: re.Match[str]) -> int:
        ch = m.group()
        if ch in "¡¿'‘’`´-":
            return m.end()
        if unicodedata.category(ch)[0] in "LM":  # a letter the word pattern did not take (combining)
            self.add(m.start(), m.end(), [Unit("say", ch)])
        else:
            self.ignored.append(ch)
        return m.end()


def scan(text: str, language: str) -> tuple[list[Piece], list[str]]:
    """The pieces of ``text`` (spans into ``text``) and the characters that could not be read."""
    scanner = Scanner(text, language)
    pieces = scanner.run()
    return pieces, scanner.ignored
