"""audiocpp.book: a book file (EPUB 2/3, Markdown, HTML, plain text) to a chaptered audiobook: an .m4b
with chapter marks (or one file per chapter), one narrator, sentence captions, a read-along EPUB 3 and
ACX-ready loudness (``audiocpp book``, docs/book.md).

    from audiocpp.book import Book

    book = Book.open("novel.epub")                    # title, author, cover, chapters (book.text)
    result = book.render(out="novel.m4b", model="voxcpm2-q8_0.gguf", chapters="1-3")
    print(result.outputs, result.synthesized)

It needs the ``book`` extra (``pip install 'audiocpp[book]'``) and ffmpeg on ``PATH``.
"""

from __future__ import annotations

from .extra import need_extra


def __getattr__(name: str):  # noqa: ANN202 - the public names, imported on first use
    if name in ("Book", "BookResult"):
        from . import job

        return getattr(job, name)
    if name == "BookSettings":
        from .settings import BookSettings

        return BookSettings
    raise AttributeError(name)


__all__ = ["Book", "BookResult", "BookSettings", "need_extra"]
