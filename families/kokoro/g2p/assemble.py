"""Pieces -> tokens for the espeak-ng languages: words phonemized in context, then matched back.

Every clause (the words between two punctuation marks) goes to espeak-ng as one line, so that its
words are read in context (stress, "the" before a vowel). espeak answers with words separated by
spaces; when it gives as many words as were sent, they are matched one to one. When it does not (it
joins "of the" into one word, splits others), each word of that clause is also phonemized alone and
the two readings are aligned: matched words keep their in-context reading, the rest their own.
Spelled initialisms are composed from the letter names (:func:`.espeak.spell`), not sent to espeak.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

from . import espeak
from .readings import CLOSING, OPENING, Piece
from .tokens import Token
from .words import Unit

_STRESS = str.maketrans("", "", "ˈˌ ")


@dataclass
class _Slot:
    """One said unit waiting for its phonemes."""

    piece: int
    text: str
    phonemes: str = ""


def _similarity(a: str, b: str) -> float:
    a, b = a.translate(_STRESS), b.translate(_STRESS)
    if not a and not b:
        return 1.0
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def align(said: Sequence[str], alone: Sequence[str]) -> list[str] | None:
    """Assigns in-context output words ``said`` to the units whose own readings are ``alone`` (each
    possibly several words). Returns one phoneme string per unit, or None when no alignment fits."""
    out: list[str] = []
    i = j = 0
    while j < len(alone):
        n = max(1, len(alone[j].split()))
        options: list[tuple[float, int, int]] = []  # (score, said words taken, units taken)
        for a, b in ((n, 1), (1, 2), (1, 3), (n + 1, 1), (max(1, n - 1), 1), (2, 2)):
            if i + a > len(said) or j + b > len(alone):
                continue
            score = _similarity("".join(said[i:i + a]), "".join(alone[j:j + b]))
            options.append((score - 0.02 * (a + b - 2), a, b))
        if not options:
            return None
        _, a, b = max(options, key=lambda o: o[0])
        if b == 1:
            out.append(" ".join(said[i:i + a]))
        else:  # espeak joined these units into fewer words: each keeps its own reading
            out.extend(alone[j:j + b])
        i, j = i + a, j + b
    return out if i == len(said) else None


def _runs(pieces: Sequence[Piece]) -> list[list[tuple[int, int]]]:
    """The (piece, unit) indices of the units that go to espeak as one line: a clause (a run ends at
    punctuation and at literal phonemes). Spelled units go too, as their capital letters, so that
    the words around them keep their context ("a PhD": the article, not the letter A); their
    phonemes are then composed from the letter names."""
    runs: list[list[tuple[int, int]]] = [[]]
    for pi, piece in enumerate(pieces):
        if piece.punct:
            runs.append([])
            continue
        for ui, unit in enumerate(piece.units):
            if unit.kind == "ps":
                runs.append([])
            else:
                runs[-1].append((pi, ui))
    return [r for r in runs if r]


def _line_word(unit: Unit) -> str:
    return unit.text.upper() if unit.kind == "spell" else unit.text


def _alone(language: str, units: list[Unit]) -> list[str]:
    """Each unit phonemized by itself (a lone English "a" is the article, not the letter)."""
    out = espeak.phonemize_lines(language, [_line_word(u) for u in units])
    if language.startswith("en"):
        out = ["ə" if u.kind == "say" and u.text in ("a", "A") else ps for u, ps in zip(units, out)]
    return out


def phonemize_pieces(pieces: Sequence[Piece], language: str) -> list[list[str]]:
    """The phonemes of every unit of every piece (punctuation pieces: none)."""
    result: list[list[str]] = [[""] * len(p.units) for p in pieces]
    runs = _runs(pieces)
    lines = [" ".join(_line_word(pieces[pi].units[ui]) for pi, ui in run) for run in runs]
    said = espeak.phonemize_lines(language, lines)
    redo: list[int] = []
    for k, (run, line) in enumerate(zip(runs, said)):
        words = line.split()
        if len(words) == len(run):
            for (pi, ui), w in zip(run, words):
                result[pi][ui] = w
        else:
            redo.append(k)
    if redo:
        units = [pieces[pi].units[ui] for k in redo for pi, ui in runs[k]]
        alone_all = _alone(language, units)
        pos = 0
        for k in redo:
            run = runs[k]
            alone = alone_all[pos:pos + len(run)]
            pos += len(run)
            matched = align(said[k].split(), alone) or list(alone)
            for (pi, ui), ps in zip(run, matched):
                result[pi][ui] = ps
    for pi, piece in enumerate(pieces):
        for ui, unit in enumerate(piece.units):
            if unit.kind == "spell":
                result[pi][ui] = espeak.spell(language, unit.text) + unit.suffix
            elif unit.kind == "ps":
                result[pi][ui] = unit.text
    return result


def build_tokens(text: str, pieces: Sequence[Piece], phonemes: Sequence[Sequence[str]]) -> list[Token]:
    """Tokens with their original text and spans; a token's ``whitespace`` says whether something
    (a space, a dropped character) separates it from the next one in the text, never before a closing
    mark nor after an opening one. Tokens that came out without phonemes are left out."""
    tokens: list[Token] = []
    for piece, unit_ps in zip(pieces, phonemes):
        ps = piece.punct or " ".join(p for p in unit_ps if p)
        tokens.append(Token(text[piece.start:piece.end], ps, False, piece.start, piece.end))
    kept = [t for t in tokens if t.phonemes]
    for a, b in zip(kept, kept[1:]):
        closes = b.is_punctuation and b.phonemes[0] in CLOSING
        opens = a.is_punctuation and a.phonemes[-1] in OPENING
        after_mark = a.is_punctuation and a.phonemes[-1] in CLOSING and not b.is_punctuation
        words = not a.is_punctuation and not b.is_punctuation  # "#1": two words, even if glued
        a.whitespace = (a.end < b.start or after_mark or words) and not closes and not opens
    if kept:
        kept[-1].whitespace = False
    return kept
