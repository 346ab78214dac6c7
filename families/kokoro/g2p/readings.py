"""Numbers, money, times and dates as words: the readers the text scanner (:mod:`.normalize`) uses,
with its state and helpers. The rules are listed in :mod:`.normalize`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .lexicon import (
    CURRENCIES,
    CURRENCY_SCALES,
    DATE_JOINERS,
    ENGLISH_UNIT_ORDER,
    ENGLISH_UNITS,
    MONTH_NAMES,
    MONTH_WORDS,
    MONTHS,
    british,
)
from .numbers import Words, plural_of_number_words, say_decimal, say_digits, say_int
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


_SCALE_VALUES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_FRACTIONS = {2: ("half", "halves"), 3: ("third", "thirds"), 4: ("quarter", "quarters")}
_ORDINAL_EN = re.compile(r"(?i)(st|nd|rd|th)\b")
_ORDINAL_ROMANCE = re.compile(r"(?:\.?[ºª°])|(?:er|re|ère|e|ème|eme)\b")
_UNIT = re.compile(r"(\s?)(" + "|".join(re.escape(u) for u in ENGLISH_UNIT_ORDER) + r")(?![\w/])")


class Reader:
    """The scanner's state, its helpers and its readers of numbers, money, times and dates."""

    text: str
    language: str
    english: bool
    lang: str
    words: Words
    ctx: WordContext
    number_pattern: re.Pattern[str]
    pieces: list[Piece]

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

    def _money_words(self, symbol: str, integer: str, fraction: str | None, scale: str | None) -> list[Unit]:
        table = CURRENCIES.get(self.lang)
        digits = re.sub(r"[^\d]", "", integer)
        currency = table.get(symbol) if table else None
        if currency is None:
            return self.number_units(digits, fraction)
        if scale and self.english:  # "$1.5M": one point five million dollars
            amount = say_decimal(digits, fraction, self.language) or digits
            return say(f"{amount} {CURRENCY_SCALES[scale]} {currency.many}")
        if scale:  # elsewhere the amount in full: "5M €" cinq millions d'euros, near enough
            value = round(float(f"{digits}.{fraction or 0}") * _SCALE_VALUES[CURRENCY_SCALES[scale]])
            return say(f"{self.cardinal(value) or value} {currency.many}")
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
