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
from dataclasses import dataclass, field
from functools import lru_cache

from .lexicon import (
    ABBREVIATIONS,
    CURRENCIES,
    CURRENCY_SCALES,
    DATE_JOINERS,
    ENGLISH_ABBREVIATIONS,
    ENGLISH_UNIT_ORDER,
    ENGLISH_UNITS,
    MONTH_NAMES,
    MONTH_WORDS,
    MONTHS,
    ROMAN_CARDINAL_AFTER,
    ROMAN_ORDINAL_AFTER,
    SYMBOL_WORDS,
    WEB_WORDS,
    british,
)
from .numbers import plural_of_number_words, say_decimal, say_digits, say_int, words_for
from .words import Unit, WordContext, number_run, say, spell, word_units


@dataclass
class Piece:
    """A span of the original text: a word (``units`` said) or a punctuation mark (``punct``)."""

    start: int
    end: int
    units: list[Unit] = field(default_factory=list)
    punct: str = ""


OPENING = frozenset("(“")
CLOSING = frozenset(",.;:!?…)”")

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


_FRACTIONS = {2: ("half", "halves"), 3: ("third", "thirds"), 4: ("quarter", "quarters")}
_ORDINAL_EN = re.compile(r"(?i)(st|nd|rd|th)\b")
_ORDINAL_ROMANCE = re.compile(r"(?:\.?[ºª°])|(?:er|re|ère|e|ème|eme)\b")


_ROMAN = re.compile(r"(?=[MDCLXVI])M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})")
_ROMAN_VALUES = {"M": 1000, "D": 500, "C": 100, "L": 50, "X": 10, "V": 5, "I": 1}


def _roman_value(numeral: str) -> int:
    total = 0
    for ch, nxt in zip(numeral, [*numeral[1:], ""]):
        value = _ROMAN_VALUES[ch]
        total += -value if nxt and _ROMAN_VALUES[nxt] > value else value
    return total


_DOTTED = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")
_UNIT = re.compile(r"(\s?)(" + "|".join(re.escape(u) for u in ENGLISH_UNIT_ORDER) + r")(?![\w/])")


def _lang2(language: str) -> str:
    return language.split("-")[0]


class Scanner:
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
    def add(self, start: int, end: int, units: list[Unit]) -> None:
        if units:
            self.pieces.append(Piece(start, end, units))

    def add_punct(self, start: int, end: int, mark: str) -> None:
        self.pieces.append(Piece(start, end, [], mark))

    def cardinal(self, n: int) -> str | None:
        return say_int(n, self.language)

    def number_units(self, integer: str, fraction: str | None = None, negative: bool = False) -> list[Unit]:
        words = say_decimal(integer, fraction, self.language, negative)
        if words is None:  # no converter: espeak reads the digits
            raw = ("-" if negative else "") + integer + ((("," if self.words.decimal_comma else ".")
                                                          + fraction) if fraction else "")
            return [Unit("say", raw)]
        return say(words)

    def _next_word(self, end: int) -> str:
        m = re.match(r"\s*([^\W\d_]+)", self.text[end:])
        return m.group(1) if m else ""

    def _prev_word(self) -> str:
        for p in reversed(self.pieces):
            if p.punct:
                return ""
            return self.text[p.start:p.end].rstrip(".")
        return ""

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

    def _money_words(self, symbol: str, integer: str, fraction: str | None, scale: str | None) -> list[Unit]:
        table = CURRENCIES.get(self.lang)
        digits = re.sub(r"[^\d]", "", integer)
        currency = table.get(symbol) if table else None
        if currency is None:
            return self.number_units(digits, fraction)
        if scale:
            scale_word = CURRENCY_SCALES[scale] if self.english else CURRENCY_SCALES[scale]
            amount = say_decimal(digits, fraction, self.language) or digits
            return say(f"{amount} {scale_word} {currency.many}") if self.english else \
                say(f"{amount} {scale_word}") + say(currency.many)
        whole = int(digits or "0")
        cents = int((fraction or "0").ljust(2, "0")[:2]) if fraction else 0
        parts: list[str] = []
        if whole or not cents or currency.sub_one is None:
            parts.append(f"{self.cardinal(whole) or whole} {currency.one if whole == 1 else currency.many}")
        if cents and currency.sub_one is not None:
            sub = currency.sub_one if cents == 1 else currency.sub_many
            parts.append(f"{self.cardinal(cents) or cents} {sub}")
        return say(" ".join(parts))

    def _money(self, m: re.Match[str]) -> int:
        self.add(m.start(), m.end(), self._money_words(m["cur"], m["mint"], m["mfrac"], m["mscale"]))
        return m.end()

    def _money2(self, m: re.Match[str]) -> int:
        self.add(m.start(), m.end(), self._money_words(m["cur2"], m["m2int"], m["m2frac"], None))
        return m.end()

    def _time(self, m: re.Match[str]) -> int:
        h, mi = int(m["th"]), int(m["tm"])
        if h > 24 or mi > 59:
            return self._num_at(m.start())
        hour = self.cardinal(h) or m["th"]
        words: list[Unit] = say(hour)
        if self.english:
            if mi == 0:
                if not m["tap"] and h <= 12:
                    words += say("o'clock")
                elif not m["tap"]:
                    words += say("hundred")
            elif mi < 10:
                words += say(f"oh {self.cardinal(mi)}")
            else:
                words += say(self.cardinal(mi) or m["tm"])
            if m["ts"]:
                words += say(f"and {self.cardinal(int(m['ts']))} seconds")
            if m["tap"]:
                words += spell(m["tap"].upper() + "M")
        else:
            if mi:
                words += say(self.cardinal(mi) or m["tm"])
            if m["ts"]:
                words += say(self.cardinal(int(m["ts"])) or m["ts"])
        self.add(m.start(), m.end(), words)
        return m.end()

    def _hour(self, m: re.Match[str]) -> int:
        if not self.english:
            return self._num_at(m.start())
        units = say(self.cardinal(int(m["hh"])) or m["hh"]) + spell(m["hap"].upper() + "M")
        self.add(m.start(), m.end(), units)
        return m.end()

    def _date_words(self, year: int | None, month: int, day: int) -> list[Unit] | None:
        if not (1 <= month <= 12 and 1 <= day <= 31):
            return None
        if not self.english:
            names = MONTH_NAMES.get(self.lang)
            ordinal = (day == 1 and self.lang == "fr") or self.lang == "de"  # le premier mai; am ersten Mai
            day_words = say_int(day, self.language, "ordinal" if ordinal else "cardinal")
            if names is None or day_words is None:
                return None
            before_month, before_year = DATE_JOINERS[self.lang]
            words = " ".join(w for w in (day_words, before_month, names[month - 1]) if w)
            if year is not None:
                year_words = say_int(year, self.language, "year" if self.lang == "de" else "cardinal")
                words = " ".join(w for w in (words, before_year, year_words or str(year)) if w)
            return say(words)
        ordinal = say_int(day, self.language, "ordinal") or str(day)
        words = f"{MONTHS[month - 1]} {ordinal}" if self.language == "en-us" else \
            f"the {ordinal} of {MONTHS[month - 1]}"
        units = say(words)
        if year is not None:
            units += say(say_int(year, self.language, "year") or str(year))
        return units

    def _iso(self, m: re.Match[str]) -> int:
        units = self._date_words(int(m["iy"]), int(m["imo"]), int(m["id"]))
        if units is None:
            return self._num_at(m.start())
        self.add(m.start(), m.end(), units)
        return m.end()

    def _sdate(self, m: re.Match[str]) -> int:
        a, b, c = int(m["sa"]), int(m["sb"] or m["sb2"]), m["sc"] or m["sc2"]
        year = int(c) if len(c) == 4 else 2000 + int(c)
        month, day = (a, b) if self.language == "en-us" and m["sb"] else (b, a)  # 21.03.2024: day first
        units = self._date_words(year, month, day)
        if units is None:
            return self._num_at(m.start())
        self.add(m.start(), m.end(), units)
        return m.end()

    def _version(self, m: re.Match[str]) -> int:
        units: list[Unit] = []
        for i, part in enumerate(m.group().split(".")):
            if i:
                units += say(self.words.point or ".")
            units += number_run(part, self.ctx)
        self.add(m.start(), m.end(), units)
        return m.end()

    def _phone(self, m: re.Match[str]) -> int:
        groups = re.split(r"[-.]", m.group())
        units: list[Unit] = []
        for g in groups:
            words = say_digits(g, self.language)
            units += say(words) if words else [Unit("say", g)]
        self.add(m.start(), m.end(), units)
        return m.end()

    def _range(self, m: re.Match[str]) -> int:
        a, b = int(m["r1"]), int(m["r2"])
        if not self.english or a >= b:
            return self._num_at(m.start())
        units = self._plain_number(m["r1"]) + say("to") + self._plain_number(m["r2"])
        self.add(m.start(), m.end(), units)
        return m.end()

    def _plain_number(self, digits: str) -> list[Unit]:
        n = int(digits)
        if self.english and len(digits) == 4 and 1100 <= n <= 2099:
            return say(say_int(n, self.language, "year") or digits)
        return number_run(digits, self.ctx) if len(digits) <= 4 else self.number_units(digits)

    def _frac(self, m: re.Match[str]) -> int:
        a, b = int(m["fa"]), int(m["fb"])
        if self.english and b in _FRACTIONS and 0 < a < b:
            one, many = _FRACTIONS[b]
            units = say(f"{self.cardinal(a)} {one if a == 1 else many}")
            if a == 1 and b == 2:
                units = say("one half")
        elif self.english and 0 < a < b <= 16:
            ordinal = say_int(b, self.language, "ordinal") or str(b)
            units = say(f"{self.cardinal(a)} {ordinal}{'s' if a > 1 else ''}")
        else:
            units = number_run(m["fa"], self.ctx) + number_run(m["fb"], self.ctx)
        self.add(m.start(), m.end(), units)
        return m.end()

    def _num_at(self, start: int) -> int:
        """Reads the number that starts at ``start`` with the plain number rule."""
        m = self.number_pattern.match(self.text, start)
        assert m is not None
        return self._number(m)

    def _num(self, m: re.Match[str]) -> int:
        return self._number(m)

    def _number(self, m: re.Match[str]) -> int:
        start, end = m.start(), m.end()
        integer = re.sub(r"[^\d]", "", m["int"])
        fraction = m["dec"]
        negative = bool(m["sign"])
        separated = integer != m["int"]
        rest = self.text[end:]
        n = int(integer)
        # percent
        pm = re.match(r"\s?%", rest)
        if pm:
            units = self.number_units(integer, fraction, negative)
            units += say(self.words.percent) if self.words.percent != "%" else []
            self.add(start, end + pm.end(), units)
            return end + pm.end()
        if not fraction and not negative:
            # ordinals
            om = _ORDINAL_EN.match(rest) if self.english else (
                _ORDINAL_ROMANCE.match(rest) if self.lang in ("fr", "es", "it", "pt") else None)
            if om:
                words = say_int(n, self.language, "ordinal")
                if words:
                    self.add(start, end + om.end(), say(words))
                    return end + om.end()
            # decades and plurals: 1990s, 80s
            if self.english and re.match(r"'?s\b", rest):
                sm = re.match(r"'?s\b", rest)
                assert sm is not None
                base = self._plain_number(integer)
                words = plural_of_number_words(" ".join(u.text for u in base))
                self.add(start, end + sm.end(), say(words))
                return end + sm.end()
        # units
        if self.english:
            um = _UNIT.match(rest)
            if um and not (um.group(1) and um.group(2) in ("x", "h", "m", "g", "l", "L", "V", "W")):
                one, many = ENGLISH_UNITS[um.group(2)]
                words = one if (n == 1 and not fraction) else many
                if self.language != "en-us":
                    words = british(words)
                units = self.number_units(integer, fraction, negative) + say(words)
                self.add(start, end + um.end(), units)
                return end + um.end()
        # a day next to a month name
        if (self.english and not fraction and not negative and not separated and 1 <= n <= 31
                and (self._prev_word() in MONTH_WORDS or self._next_word(end) in MONTH_WORDS)):
            words = say_int(n, self.language, "ordinal")
            if words:
                self.add(start, end, say(words))
                return end
        # letters glued to the number: 4K, 3D, 5G
        lm = re.match(r"[A-Za-z]+(?![\w])", rest)
        if lm and not fraction:
            units = self._plain_number(integer) + word_units(lm.group(), self.ctx)
            if len(lm.group()) <= 2 and lm.group().isalpha():
                units = self._plain_number(integer) + spell(lm.group())
            self.add(start, end + lm.end(), units)
            return end + lm.end()
        if fraction or negative or separated:
            units = self.number_units(integer, fraction, negative)
        elif len(integer) > 1 and integer.startswith("0") or len(integer) > 15:
            words = say_digits(integer, self.language)
            units = say(words) if words else [Unit("say", integer)]
        elif len(integer) == 4 and 1100 <= n <= 2099 and self.language in ("en-us", "en-gb", "de"):
            units = say(say_int(n, self.language, "year") or integer)
        else:
            units = self.number_units(integer)
        self.add(start, end, units)
        return end

    def _decade(self, m: re.Match[str]) -> int:
        words = self.cardinal(int(m["dd"]))
        if not words or not self.english:
            return self._num_at(m.start() + 1)
        self.add(m.start(), m.end(), say(plural_of_number_words(words)))
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
