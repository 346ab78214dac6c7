"""Readers: a book file (EPUB 2/3, HTML, Markdown, plain text) to :class:`~audiocpp.book.text.BookText`."""

from __future__ import annotations

from pathlib import Path

from audiocpp.engine import fs
from audiocpp.engine.errors import UsageError

from ..text import BookText

KINDS = {
    ".epub": "epub",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".txt": "text",
    ".text": "text",
}


def input_kind(path: Path) -> str:
    """epub, markdown, html or text: by extension, else by content (a ZIP is an EPUB)."""
    kind = KINDS.get(path.suffix.lower())
    if kind is not None:
        return kind
    try:
        with open(path, "rb") as handle:
            head = handle.read(512)
    except OSError as error:
        raise UsageError(f"cannot read {str(path)!r}: {error.strerror or error}") from None
    if head.startswith(b"PK\x03\x04"):
        return "epub"
    if head.lstrip().lower().startswith((b"<!doctype html", b"<html")):
        return "html"
    return "text"


def read_book(path: Path) -> BookText:
    """The book at ``path``, or a UsageError saying what is wrong with it and what to do."""
    if not fs.exists(path):
        raise UsageError(f"the book {str(path)!r} does not exist", hint="check the path")
    if not fs.is_file(path):
        raise UsageError(
            f"the book {str(path)!r} is not a file", hint="pass an .epub, .md, .html or .txt file"
        )
    kind = input_kind(path)
    if kind == "epub":
        from .epub import read_epub

        book = read_epub(path)
    elif kind == "markdown":
        from .documents import read_markdown

        book = read_markdown(path)
    elif kind == "html":
        from .documents import read_html

        book = read_html(path)
    else:
        from .documents import read_text

        book = read_text(path)
    if not book.chapters or not any(chapter.blocks for chapter in book.chapters):
        raise UsageError(
            f"the book {str(path)!r} has no text to read ({kind}: no paragraphs found)",
            hint="check that it is the book's text (a scanned or image-only book has none; a DRM "
            "or password-protected one is refused by name)",
        )
    return book
