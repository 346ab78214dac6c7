"""Splitting long text into chunks a model can speak one at a time.

- ``chunk_text_punctuation``: OmniVoice 0.2.1's rule, reproduced exactly (its chunks, its
  lengths in characters, its quirks: "e.g." is split after "e." because only the last word
  before a "." is looked up, and a short chunk merges past ``chunk_len``).
- ``chunk_text``: a general chunker for families without a rule of their own. Chunks never
  exceed ``max_chars`` code points; they end at sentence ends when possible, else at clause
  marks, else between words (any character boundary in CJK text), else at a code point
  boundary that does not separate a combining mark from its base. Whitespace is normalised
  to single spaces; every other character is kept, once, in order.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

from .punctuation import (
    ABBREVIATIONS,
    CLAUSE_BREAK_SPACED,
    CLAUSE_BREAK_WIDE,
    CLOSERS,
    CLOSING_MARKS,
    SENTENCE_END_SPACED,
    SENTENCE_END_WIDE,
    SPLIT_PUNCTUATION,
    is_attached,
    is_cjk,
    is_opening,
)

# --------------------------------------------------------------------------- OmniVoice


def _last_word(chars: list[str]) -> str:
    """``"".join(chars).strip().split()[-1]`` without joining the whole sentence."""
    end = len(chars)
    while end and chars[end - 1].isspace():
        end -= 1
    start = end
    while start and not chars[start - 1].isspace():
        start -= 1
    return "".join(chars[start:end])


def chunk_text_punctuation(text: str, chunk_len: int, min_chunk_len: int | None = None) -> list[str]:
    """OmniVoice's ``chunk_text_punctuation``: split after ``SPLIT_PUNCTUATION`` (not after a
    "." that ends one of ``ABBREVIATIONS``), glue punctuation and closing marks that open a
    sentence to the one before, merge sentences while the chunk stays within ``chunk_len``
    characters, then merge chunks shorter than ``min_chunk_len`` into their neighbour (the first
    into the second, others into the previous one). Chunks are stripped; empty ones dropped."""
    sentences: list[list[str]] = []
    current: list[str] = []
    for char in text:
        if not current and sentences and (char in SPLIT_PUNCTUATION or char in CLOSING_MARKS):
            sentences[-1].append(char)
            continue
        current.append(char)
        if char in SPLIT_PUNCTUATION and not (char == "." and _last_word(current) in ABBREVIATIONS):
            sentences.append(current)
            current = []
    if current:
        sentences.append(current)

    merged: list[list[str]] = []
    chunk: list[str] = []
    for sentence in sentences:
        if len(chunk) + len(sentence) <= chunk_len:
            chunk = chunk + sentence
        else:
            if chunk:
                merged.append(chunk)
            chunk = list(sentence)
    if chunk:
        merged.append(chunk)

    final = merged
    if min_chunk_len is not None:
        first_short = bool(merged) and len(merged[0]) < min_chunk_len
        final = []
        for i, piece in enumerate(merged):
            if (i == 1 and first_short) or (len(piece) < min_chunk_len and final):
                final[-1] = final[-1] + piece
            else:
                final.append(piece)
    strings = ("".join(piece).strip() for piece in final)
    return [s for s in strings if s]


# --------------------------------------------------------------------------- general

Piece = tuple[str, str]  # (separator before the piece: "" or " ", the piece's text)

_INITIAL = re.compile(r"[A-Z]\.")
_DOTTED = re.compile(r"(?:[A-Za-z]\.){2,}")
_OPENERS_TO_STRIP = "\"'“‘«‹([{（［｛〔〈《「『【"


def chunk_text(text: str, max_chars: int, *, min_chars: int = 0) -> list[str]:
    """Chunks of at most ``max_chars`` code points, cut at the strongest boundary available.

    Sentences are packed greedily; a line break also ends a sentence. ``min_chars``: a chunk
    shorter than this takes whole sentences (pieces) from the end of the chunk before it, as
    long as neither falls below ``min_chars`` nor exceeds ``max_chars`` (0: off).
    """
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, got {max_chars}")
    pieces: list[Piece] = []
    for line in text.splitlines():
        paragraph = " ".join(line.split())
        if not paragraph:
            continue
        for i, (sep, sentence) in enumerate(_split_at(paragraph, _sentence_breaks(paragraph))):
            fitted = _fit(sentence, max_chars, 0)
            pieces.append((" " if i == 0 else sep, fitted[0][1]))
            pieces.extend(fitted[1:])
    groups = _group(pieces, max_chars)
    if min_chars > 0:
        _rebalance(groups, max_chars, min_chars)
    return [_join(group) for group in groups]


def split_sentences(text: str) -> list[str]:
    """The sentences ``chunk_text`` starts from (whitespace normalised, line breaks end one)."""
    out: list[str] = []
    for line in text.splitlines():
        paragraph = " ".join(line.split())
        out.extend(piece for _, piece in _split_at(paragraph, _sentence_breaks(paragraph)))
    return out


def _split_at(text: str, breaks: list[int]) -> list[Piece]:
    """Cut ``text`` (single-spaced, stripped) before each index in ``breaks``."""
    pieces: list[Piece] = []
    start = 0
    for end in [*breaks, len(text)]:
        if end <= start:
            continue
        piece = text[start:end]
        sep = " " if piece.startswith(" ") else ""
        piece = piece.strip()
        if piece:
            pieces.append((sep if pieces else "", piece))
        start = end
    return pieces


def _extend_over_closers(text: str, j: int) -> int:
    while j < len(text) and text[j] in CLOSERS:
        j += 1
    return j


_WINDOW = 64  # even: a window ending at a "." starts at a letter of a "a.b.c." run


def _is_abbreviation(text: str, dot: int) -> bool:
    # The word is looked up within a window first: searching back to the start of a space-less
    # text at every "." made text like "字.字.字." quadratic (minutes for a megabyte).
    lo = max(0, dot + 1 - _WINDOW)
    start = text.rfind(" ", lo, dot) + 1
    if start == 0 and lo > 0 and not _abbreviation_word(text[lo:dot + 1]):
        return False  # a word longer than the window that does not even end like an abbreviation
    if start == 0:
        start = text.rfind(" ", 0, dot) + 1
    return _abbreviation_word(text[start:dot + 1])


def _abbreviation_word(word: str) -> bool:
    word = word.lstrip(_OPENERS_TO_STRIP)
    return word in ABBREVIATIONS or bool(_INITIAL.fullmatch(word) or _DOTTED.fullmatch(word))


def _sentence_breaks(text: str) -> list[int]:
    breaks: list[int] = []
    ends = SENTENCE_END_WIDE | SENTENCE_END_SPACED
    i, n = 0, len(text)
    while i < n:
        if text[i] not in ends:
            i += 1
            continue
        j = i + 1
        while j < n and (text[j] in ends or text[j] in CLOSERS):
            j += 1
        run = text[i:j]
        if j < n and (any(c in SENTENCE_END_WIDE for c in run) or _spaced_end(text, i, j, run)):
            breaks.append(j)
        i = j
    return breaks


def _spaced_end(text: str, i: int, j: int, run: str) -> bool:
    """Does ``run`` of ".!?…" (and closers) at ``i:j`` end a sentence? It needs a space or a CJK
    character after it, and a lone "." must not end an abbreviation, an initial or "e.g."."""
    if not (text[j] == " " or is_cjk(text[j])):
        return False
    return not (run.rstrip("".join(CLOSERS)) == "." and _is_abbreviation(text, i))


def _clause_breaks(text: str) -> list[int]:
    breaks: set[int] = set()
    n = len(text)
    for i, char in enumerate(text):
        spaced_after = i + 1 == n or text[i + 1] == " "
        if (char in CLAUSE_BREAK_WIDE
                or (char in CLAUSE_BREAK_SPACED and spaced_after)
                or (char in "-–" and spaced_after and i > 0 and text[i - 1] == " ")):
            j = _extend_over_closers(text, i + 1)
            if 0 < j < n:
                breaks.add(j)
    return sorted(breaks)


def _word_breaks(text: str) -> list[int]:
    breaks: list[int] = []
    for k in range(1, len(text)):
        before, after = text[k - 1], text[k]
        cjk_boundary = before != " " and (is_cjk(before) or is_cjk(after)) \
            and not is_attached(after) and not is_opening(before)
        if after == " " or cjk_boundary:
            breaks.append(k)
    return breaks


def _glued(text: str, k: int) -> bool:
    """Would a cut before ``text[k]`` separate a mark, joiner or selector from its base?"""
    char = text[k]
    return (bool(unicodedata.combining(char)) or char in "\u200d\u200c" or 0xFE00 <= ord(char) <= 0xFE0F
            or 0x1F3FB <= ord(char) <= 0x1F3FF or text[k - 1] == "\u200d")


def _hard_split(text: str, budget: int) -> list[Piece]:
    pieces: list[Piece] = []
    start = 0
    while len(text) - start > budget:
        k = start + budget
        while k > start + 1 and _glued(text, k):
            k -= 1
        if _glued(text, k):
            k = start + budget  # a cluster longer than the budget: cut it anyway
        pieces.append(("", text[start:k]))
        start = k
    pieces.append(("", text[start:]))
    return pieces


_LEVELS: tuple[Callable[[str], list[int]], ...] = (_clause_breaks, _word_breaks)


def _fit(text: str, budget: int, level: int) -> list[Piece]:
    """``text`` as pieces of at most ``budget``, cut at the strongest level that has a break."""
    if len(text) <= budget:
        return [("", text)]
    if level == len(_LEVELS):
        return _hard_split(text, budget)
    parts = _split_at(text, _LEVELS[level](text))
    if len(parts) <= 1:
        return _fit(text, budget, level + 1)
    items: list[Piece] = []
    for sep, part in parts:
        fitted = _fit(part, budget, level + 1)
        items.append((sep, fitted[0][1]))
        items.extend(fitted[1:])
    return _pack(items, budget)


def _pack(items: list[Piece], budget: int) -> list[Piece]:
    """Greedily join consecutive pieces while the result stays within ``budget``."""
    out: list[Piece] = []
    for sep, piece in items:
        if out and len(out[-1][1]) + len(sep) + len(piece) <= budget:
            out[-1] = (out[-1][0], out[-1][1] + sep + piece)
        else:
            out.append((sep, piece))
    return out


def _group(items: list[Piece], budget: int) -> list[list[Piece]]:
    """``_pack`` that keeps the pieces of each chunk apart (for ``_rebalance``)."""
    groups: list[list[Piece]] = []
    size = 0  # _size(groups[-1]), kept as it grows (recounting made long texts slow)
    for item in items:
        grown = size + len(item[0]) + len(item[1])
        if groups and grown <= budget:
            groups[-1].append(item)
            size = grown
        else:
            groups.append([item])
            size = len(item[1])
    return groups


def _size(group: list[Piece]) -> int:
    return sum(len(sep) + len(piece) for sep, piece in group) - len(group[0][0])


def _rebalance(groups: list[list[Piece]], budget: int, min_chars: int) -> None:
    """Move trailing pieces of a chunk into the short chunk after it while both stay within
    ``[min_chars, budget]`` (greedy packing leaves short chunks only at the back of a run)."""
    for i in range(1, len(groups)):
        prev, cur = groups[i - 1], groups[i]
        while _size(cur) < min_chars and len(prev) > 1:
            candidate = [prev[-1], *cur]
            if _size(candidate) > budget or _size(prev[:-1]) < min_chars:
                break
            prev.pop()
            cur = groups[i] = candidate


def _join(group: list[Piece]) -> str:
    return group[0][1] + "".join(sep + piece for sep, piece in group[1:])
