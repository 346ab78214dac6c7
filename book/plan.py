"""What will be spoken: chapters cut into sentences, sentences into the chunks the model synthesizes.

One sentence is one chunk (a row of the batch), so each sentence's start and end in the final
timeline is known exactly (the captions' cues); a sentence longer than ``max_chars`` is cut at
clause marks, else between words (``engine.text.chunking.chunk_text``), its pieces one cue. A
sentence with nothing to say ("* * *", "—") is a pause, not a chunk. Each chapter starts with its
title spoken, unless titles are off. A ``[pause 2s]`` or ``<break time="2s"/>`` marker in the text
(engine/text/markup.py) is silence of its length in place of the usual gap before the next sentence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from audiocpp.engine.errors import UsageError
from audiocpp.engine.text.chunking import chunk_text, split_sentences
from audiocpp.engine.text.markup import Pause, Speech, is_ssml, parse_markup

from .text import BookText, Chapter, has_words

DEFAULT_MAX_CHARS = 250
#: characters per second of speech, for estimates only (English narration: 14-16)
CHARS_PER_SECOND = 15.0


@dataclass
class Unit:
    """One chunk: ``text`` is what the model says; ``key`` (set later) names its audio."""

    text: str
    sentence: int  # index of its sentence in the chapter
    key: str = ""


@dataclass
class Sentence:
    """A cue: the sentence's text as written, its paragraph (-1: the title) and its units."""

    text: str
    paragraph: int
    units: list[int] = field(default_factory=list)
    #: seconds of silence before it asked by a ``[pause]`` / ``<break>`` marker (instead of the usual gap)
    pause_before: float | None = None


@dataclass
class ChapterPlan:
    number: int  # 1-based, in the book
    title: str
    sentences: list[Sentence] = field(default_factory=list)
    units: list[Unit] = field(default_factory=list)

    @property
    def chars(self) -> int:
        return sum(len(unit.text) for unit in self.units)

    @property
    def keys(self) -> list[str]:
        return [unit.key for unit in self.units]


def spoken_title(title: str) -> str:
    """A title as said: with a full stop when it ends in a letter or digit (a falling tone)."""
    return title + "." if title and title[-1].isalnum() else title


def plan_chapter(
    chapter: Chapter, number: int, *, titles: bool = True, max_chars: int = DEFAULT_MAX_CHARS
) -> ChapterPlan:
    plan = ChapterPlan(number, chapter.title)

    pending: float | None = None  # a marker's pause, for the next sentence

    def add(text: str, paragraph: int, spoken: str | None = None) -> None:
        nonlocal pending
        pieces = [p for p in chunk_text(spoken or text, max_chars) if has_words(p)]
        if not pieces:
            return
        sentence = Sentence(text, paragraph, pause_before=pending)
        pending = None
        for piece in pieces:
            sentence.units.append(len(plan.units))
            plan.units.append(Unit(piece, len(plan.sentences)))
        plan.sentences.append(sentence)

    if titles and has_words(chapter.title):
        add(chapter.title, -1, spoken_title(chapter.title))
    for index, block in enumerate(chapter.blocks):
        if is_ssml(block.text):
            raise UsageError(f"chapter {number} holds an SSML document, which a book does not read",
                             hint="write pauses as [pause 1s] or <break time=\"1s\"/> in the text")
        for sentence in split_sentences(block.text):
            for part in parse_markup(sentence) or (Speech(sentence),):
                if isinstance(part, Pause):
                    pending = (pending or 0.0) + part.seconds
                elif has_words(part.text):
                    add(part.text, index)
    return plan


def plan_book(
    book: BookText, *, titles: bool = True, max_chars: int = DEFAULT_MAX_CHARS
) -> list[ChapterPlan]:
    """Every chapter's plan (chapters with nothing to say are kept, empty, to keep their numbers)."""
    return [
        plan_chapter(chapter, number, titles=titles, max_chars=max_chars)
        for number, chapter in enumerate(book.chapters, start=1)
    ]


def parse_selection(spec: str | None, count: int) -> list[int]:
    """``--chapters 3-5,8`` as chapter numbers (1-based, in order, each once); None: all."""
    if spec is None or not spec.strip():
        return list(range(1, count + 1))
    chosen: list[int] = []
    hint = f"use numbers and ranges from 1 to {count}, e.g. --chapters 1-3,{count} (`--list` shows them)"
    for part in spec.split(","):
        part = part.strip()
        low, sep, high = part.partition("-")
        try:
            first = int(low) if low.strip() else 1
            last = (int(high) if high.strip() else count) if sep else first
        except ValueError:
            raise UsageError(
                f"--chapters {spec!r}: {part!r} is not a chapter number or range", hint=hint
            ) from None
        if not 1 <= first <= last <= count:
            raise UsageError(
                f"--chapters {spec!r}: {part!r} is outside the book's chapters 1-{count}"
                if first <= last
                else f"--chapters {spec!r}: the range {part!r} runs backwards",
                hint=hint,
            )
        chosen.extend(n for n in range(first, last + 1) if n not in chosen)
    return chosen
