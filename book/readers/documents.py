"""HTML, Markdown and plain text books.

- HTML: title from ``<title>`` (else the first ``<h1>``), author from ``<meta name="author">``, language
  from ``<html lang>``; chapters at ``h1`` / ``h2`` headings (:func:`chapters_at_headings`).
- Markdown: CommonMark (markdown-it-py) rendered to HTML, then read as HTML: chapters at ``#`` / ``##``;
  a YAML-style front matter block (``---`` lines around ``title:``, ``author:``, ``lang:``) gives the
  metadata.
- Plain text: paragraphs are separated by blank lines (the lines of one are joined: hard-wrapped text
  reads as prose); chapters start at form feeds and at lines such as ``Chapter 1``, ``CHAPTER ONE``,
  ``Chapter IV. The Storm``, ``Prologue``, ``Epilogue`` on their own; else the file is one chapter.
  Lines that are only a page number (``12``, ``- 12 -``, ``Page 12``) are dropped.

Text files must be UTF-8 (a BOM is fine) or UTF-16 with a BOM.
"""

from __future__ import annotations

import re
from pathlib import Path

from audiocpp.engine.errors import UsageError

from ..safety import parse_html
from ..text import Block, BookText, Chapter, drop_duplicate_heading, normalize_text
from .markup import local_name, walk

MAX_TEXT_BYTES = 256 << 20

_NUMBER_WORDS = [
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
    "thirty",
    "forty",
    "fifty",
    "sixty",
    "seventy",
    "eighty",
    "ninety",
    "hundred",
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "eleventh",
    "twelfth",
    "last",
    "final",
]
_NUMBER = (
    rf"(?:\d{{1,4}}|[ivxlcdm]{{1,8}}|(?:{'|'.join(_NUMBER_WORDS)})(?:[- ](?:{'|'.join(_NUMBER_WORDS)}))*)"
)
CHAPTER_LINE = re.compile(
    rf"^(?:(?:chapter|chap\.|part|book|section)\s+{_NUMBER}\b(?:[\s.:\-–—]+\S.*)?|"
    r"prologue|epilogue|preface|foreword|introduction|afterword|interlude)\.?$",
    re.IGNORECASE,
)
_PAGE_NUMBER = re.compile(r"^(?:page\s+)?[-–—]?\s*\d{1,4}\s*[-–—]?$", re.IGNORECASE)


def read_bytes(path: Path, what: str) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_TEXT_BYTES:
            raise UsageError(
                f"{str(path)!r} is {size >> 20} MiB of {what}, more than is read "
                f"(at most {MAX_TEXT_BYTES >> 20} MiB)",
                hint="split it into parts",
            )
        return path.read_bytes()
    except OSError as error:
        raise UsageError(
            f"cannot read {str(path)!r}: {error.strerror or error}", hint="check the path and its permissions"
        ) from None


def decode_text(data: bytes, path: Path) -> str:
    """UTF-8 (with or without a BOM) or UTF-16 with a BOM, else a clear error."""
    try:
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):
            return data.decode("utf-16")
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise UsageError(
            f"{str(path)!r} is not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start})",
            hint=f"convert it, e.g. `iconv -f WINDOWS-1252 -t UTF-8 {path.name} > book.txt`",
        ) from None


# -- HTML -----------------------------------------------------------------------------------------------
def read_html(path: Path) -> BookText:
    root = parse_html(read_bytes(path, "HTML"), repr(str(path)))
    return _html_book(root, path, "html", {})


def _html_book(root, path: Path, kind: str, front: dict[str, str]) -> BookText:
    title = front.get("title", "")
    author = front.get("author", "")
    language = front.get("lang", "") or front.get("language", "") or (root.get("lang") or "")
    for element in root.iter():
        name = local_name(element.tag)
        if name == "title" and not title:
            title = normalize_text("".join(element.itertext()))
        elif name == "meta" and (element.get("name") or "").lower() == "author" and not author:
            author = normalize_text(element.get("content") or "")
    walked = walk(root)
    found, chapters = chapters_by_heading(walked.blocks, title or _pretty(path))
    return BookText(
        title=title or found or _pretty(path), author=author, language=language, chapters=chapters, kind=kind
    )


def chapters_by_heading(blocks: list[Block], fallback: str) -> tuple[str | None, list[Chapter]]:
    from ..text import chapters_at_headings

    found, chapters = chapters_at_headings(blocks, fallback)
    return found, [
        c
        for c in (Chapter(c.title, drop_duplicate_heading(c.title, c.blocks), c.source) for c in chapters)
        if c.blocks or c.source != "start"
    ]


# -- Markdown -------------------------------------------------------------------------------------------
def read_markdown(path: Path) -> BookText:
    from markdown_it import MarkdownIt

    text = decode_text(read_bytes(path, "Markdown"), path)
    front, text = _front_matter(text)
    rendered = MarkdownIt("commonmark", {"html": True}).render(text)
    root = parse_html(f"<html><body>{rendered}</body></html>".encode(), repr(str(path)))
    return _html_book(root, path, "markdown", front)


def _front_matter(text: str) -> tuple[dict[str, str], str]:
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text
    for end in range(1, min(len(lines), 60)):
        if lines[end].strip() in ("---", "..."):
            meta = {}
            for line in lines[1:end]:
                key, sep, value = line.partition(":")
                if sep:
                    meta[key.strip().lower()] = value.strip().strip("'\"")
            return meta, "\n".join(lines[end + 1 :])
    return {}, text


# -- plain text -----------------------------------------------------------------------------------------
def read_text(path: Path) -> BookText:
    text = decode_text(read_bytes(path, "text"), path).replace("\r\n", "\n").replace("\r", "\n")
    pages = text.split("\f")
    chapters: list[Chapter] = []
    line_number = 1
    for page_index, page in enumerate(pages):
        chapters.extend(_text_chapters(page, line_number, form_feed=page_index > 0 or len(pages) > 1))
        line_number += page.count("\n")
    chapters = [
        c for c in chapters if c.blocks
    ]  # a heading line alone (PART ONE before CHAPTER 1) is dropped
    return BookText(title=_pretty(path), chapters=_numbered(chapters), kind="text")


def _text_chapters(page: str, first_line: int, *, form_feed: bool) -> list[Chapter]:
    paragraphs: list[tuple[int, str]] = []
    current: list[str] = []
    start = first_line
    for offset, line in enumerate(page.split("\n")):
        if line.strip():
            if not current:
                start = first_line + offset
            current.append(line.strip())
        elif current:
            paragraphs.append((start, " ".join(current)))
            current = []
    if current:
        paragraphs.append((start, " ".join(current)))
    chapters: list[Chapter] = []
    chapter: Chapter | None = None
    for index, (line, paragraph) in enumerate(paragraphs):
        text = normalize_text(paragraph)
        if not text or _PAGE_NUMBER.fullmatch(text):
            continue
        heading = len(text) <= 80 and CHAPTER_LINE.fullmatch(text)
        if heading or (form_feed and chapter is None and index == 0 and len(text) <= 80):
            chapter = Chapter(text.rstrip("."), [], f"line {line}")
            chapters.append(chapter)
            continue
        if chapter is None:
            chapter = Chapter("", [], f"line {line}")
            chapters.append(chapter)
        chapter.blocks.append(Block(text))
    return chapters


def _numbered(chapters: list[Chapter]) -> list[Chapter]:
    for index, chapter in enumerate(chapters, start=1):
        if not chapter.title:
            chapter.title = f"Chapter {index}" if len(chapters) > 1 else ""
    return chapters


def _pretty(path: Path) -> str:
    return re.sub(r"[_\-]+", " ", path.stem).strip() or path.stem
