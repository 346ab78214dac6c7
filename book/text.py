"""A book as text: its metadata and chapters, each a list of blocks (headings and paragraphs).

Every reader (EPUB, HTML, Markdown, plain text) produces a :class:`BookText`; everything after
reading (sentences, chunks, audio, captions) works on it alone.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

#: characters that are not read: soft hyphens, zero-width spaces and joiners, the BOM, word joiners
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"), None)
_SPACE = re.compile(r"\s+")


def normalize_text(text: str) -> str:
    """NFC, invisible characters dropped, every run of whitespace (no-break spaces too) one space."""
    text = unicodedata.normalize("NFC", text).translate(_INVISIBLE)
    return _SPACE.sub(" ", text).strip()


def has_words(text: str) -> bool:
    """Whether ``text`` holds anything to say (a letter or a digit): "* * *" does not."""
    return any(ch.isalnum() for ch in text)


@dataclass
class Block:
    """A heading (``level`` 1-6) or a paragraph (``level`` 0) of normalized text."""

    text: str
    level: int = 0

    @property
    def is_heading(self) -> bool:
        return self.level > 0


@dataclass
class Chapter:
    title: str
    blocks: list[Block] = field(default_factory=list)
    source: str = ""  # where it starts in the input (a document and fragment, a line)

    @property
    def paragraphs(self) -> list[str]:
        return [block.text for block in self.blocks]

    @property
    def chars(self) -> int:
        return sum(len(block.text) for block in self.blocks)

    @property
    def words(self) -> int:
        return sum(len(block.text.split()) for block in self.blocks)


@dataclass
class Cover:
    data: bytes
    media_type: str  # image/jpeg or image/png

    @property
    def extension(self) -> str:
        return ".png" if self.media_type == "image/png" else ".jpg"


def image_type(data: bytes) -> str | None:
    """The media type of a JPEG or PNG image from its first bytes (None for anything else)."""
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    return None


@dataclass
class BookText:
    title: str
    author: str = ""
    language: str = ""
    cover: Cover | None = None
    chapters: list[Chapter] = field(default_factory=list)
    kind: str = "text"  # epub3, epub2, html, markdown, text
    notes: list[str] = field(default_factory=list)  # what the reader skipped or guessed, said once

    @property
    def chars(self) -> int:
        return sum(chapter.chars for chapter in self.chapters)


def drop_duplicate_heading(title: str, blocks: list[Block]) -> list[Block]:
    """The chapter's blocks without a first heading that says what its title says (it is spoken as
    the title already)."""
    if blocks and blocks[0].is_heading:
        first, wanted = _key(blocks[0].text), _key(title)
        if first and wanted and (first == wanted or wanted in first or first in wanted):
            return blocks[1:]
    return blocks


def _key(text: str) -> str:
    return "".join(ch for ch in text.casefold() if ch.isalnum())


def chapters_at_headings(blocks: list[Block], fallback_title: str) -> tuple[str | None, list[Chapter]]:
    """Chapters of a document cut at its ``#`` / ``##`` (h1 / h2) headings.

    With two or more level-1 headings the chapters start at them (level 2 are sections inside);
    with a single level-1 heading first and level-2 headings after it, the level-1 heading is the
    book's title and the chapters start at level 2; with only level-2 headings, at those; with
    none, the whole document is one chapter. Text before the first chapter heading becomes a
    chapter of its own. Returns (the title found, or None; the chapters)."""
    h1 = [i for i, b in enumerate(blocks) if b.level == 1]
    h2 = [i for i, b in enumerate(blocks) if b.level == 2]
    title: str | None = None
    if len(h1) >= 2:
        level = 1
    elif len(h1) == 1 and h2 and h1[0] < h2[0] and not any(b.text for b in blocks[: h1[0]]):
        title, level = blocks[h1[0]].text, 2
        blocks = blocks[: h1[0]] + blocks[h1[0] + 1 :]
    elif len(h1) == 1 and not h2:
        level = 1
    elif h2:
        level = 2
    else:
        return None, [Chapter(fallback_title, list(blocks), "start")] if blocks else []
    chapters: list[Chapter] = []
    current: Chapter | None = None
    for index, block in enumerate(blocks):
        if block.level and block.level <= level:
            current = Chapter(block.text, [], f"heading {index + 1}")
            chapters.append(current)
        elif current is None:
            current = Chapter(title or fallback_title, [block], "start")
            chapters.append(current)
        else:
            current.blocks.append(block)
    return title, chapters
