"""Word timings in a book, where the family times its words (Kokoro; ``TaskResult.words``).

A chunk's words come with their start and end in the chunk's own audio. They are placed on the chapter's
timeline exactly as the chunk's audio is (:func:`place`: the quiet cut at the chunk's head, the chunk's
place after the pauses before it), so mastering (which keeps every sample where it is) and the chapters'
concatenation move them as they move the sentences. Each placed word is then found in its sentence's
text as written (:func:`align`), so the read-along book can wrap it in a ``<span>`` and the captions can
quote it; a word the text does not hold (a rewrite of the text front end) keeps no place, and a sentence
with no word found is highlighted whole, as for a family without word timings.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

#: a word found this many letters or digits past where the previous one ended is another occurrence
#: (the search gives up rather than jump ahead)
MAX_SKIPPED = 24


@dataclass(frozen=True)
class PlacedWord:
    text: str
    start: int  # samples from the chapter's start
    end: int


#: one word of a sentence: (first character, end character) in its text, (start, end) in samples
SentenceWord = tuple[int, int, int, int]


def spoken(text: str) -> bool:
    """A word, not punctuation (the families time punctuation as tokens of its own)."""
    return any(ch.isalnum() for ch in text)


def place(
    words: Sequence[Sequence[object]], *, head: int, length: int, position: int, rate: int
) -> list[PlacedWord]:
    """A chunk's words (``[text, start_s, end_s, ...]`` in its audio) on the chapter's timeline: the chunk's
    audio without its first ``head`` samples, ``length`` samples kept, starts at sample ``position``.
    A word is clipped to the kept audio, and left out when nothing of it is kept."""
    out: list[PlacedWord] = []
    for word in words:
        text, start_s, end_s = str(word[0]), float(word[1]), float(word[2])  # type: ignore[arg-type]
        start = min(max(round(start_s * rate) - head, 0), length)
        end = min(max(round(end_s * rate) - head, 0), length)
        if end > start and spoken(text):
            out.append(PlacedWord(text.strip(), position + start, position + end))
    return out


def align(sentence: str, words: Sequence[PlacedWord]) -> list[SentenceWord]:
    """Each word found in ``sentence`` in order (exact, else ignoring case), with times that never go
    back: a word starts no earlier than the one before it ended."""
    out: list[SentenceWord] = []
    cursor = 0
    last_end = 0
    for word in words:
        if not word.text:
            continue
        found = re.compile(re.escape(word.text), re.IGNORECASE).search(sentence, cursor)
        if found is None:
            continue
        skipped = sum(1 for ch in sentence[cursor : found.start()] if ch.isalnum())
        if skipped > MAX_SKIPPED:
            continue
        start = max(word.start, last_end)
        if word.end <= start:
            continue
        out.append((found.start(), found.end(), start, word.end))
        cursor, last_end = found.end(), word.end
    return out
