"""Reading books: EPUB 3 (ebooklib), EPUB 2 with an NCX, Markdown, HTML and text, each written by the
test; what is read aloud and what is dropped; the hostile files as clear errors; chapters to chunks."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest

from audiocpp.book.plan import parse_selection, plan_chapter
from audiocpp.book.readers import read_book
from audiocpp.book.text import Block, Chapter, chapters_at_headings
from audiocpp.engine.errors import UsageError

from . import inputs

EXPECTED = [(title, paragraphs) for title, paragraphs in inputs.CHAPTERS]


@pytest.fixture(scope="module")
def books(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("book-inputs")
    epub3 = inputs.write_epub3(root / "tides.epub")
    return {
        "epub3": epub3,
        "epub2": inputs.write_epub2(root / "tides2.epub"),
        "markdown": inputs.write_markdown(root / "tides.md"),
        "html": inputs.write_html(root / "tides.html"),
        "text": inputs.write_text(root / "tides.txt"),
        "corrupt": inputs.write_corrupt_epub(root / "corrupt.epub", epub3),
        "drm": inputs.write_drm_epub(root / "drm.epub", epub3),
        "fonts": inputs.write_font_obfuscated_epub(root / "fonts.epub", epub3),
        "bomb": inputs.write_zip_bomb(root / "bomb.epub", epub3),
        "entities": inputs.write_entity_epub(root / "entities.epub", epub3),
        "empty": inputs.write_empty_epub(root / "empty.epub"),
    }


def _content(book) -> list[tuple[str, list[str]]]:
    return [(c.title, c.paragraphs) for c in book.chapters]


def test_epub3_chapters_metadata_cover_and_what_is_dropped(books: dict[str, Path]) -> None:
    book = read_book(books["epub3"])
    assert (book.kind, book.title, book.author, book.language) == ("epub3", inputs.TITLE, inputs.AUTHOR, "en")
    # the navigation document's entries in spine order; the heading that repeats the title is not read
    # twice; the footnote marker, page number, image and script are gone
    assert _content(book) == EXPECTED
    assert book.cover is not None and book.cover.media_type == "image/jpeg"
    with zipfile.ZipFile(books["epub3"]) as archive:
        assert book.cover.data == archive.read("EPUB/cover.jpg")


def test_epub2_ncx_anchors_entities_and_metadata(books: dict[str, Path]) -> None:
    book = read_book(books["epub2"])
    assert (book.kind, book.title, book.author, book.language) == (
        "epub2",
        inputs.TITLE,
        inputs.AUTHOR,
        "en-GB",
    )
    # two chapters in one document cut at the NCX's anchors, the third in a file with a space in its
    # name; the title page before the first entry is not read; &nbsp; (XHTML 1.1's) is a space
    assert _content(book) == EXPECTED
    assert [c.source for c in book.chapters] == [
        "OEBPS/text/part1.xhtml#ch1",
        "OEBPS/text/part1.xhtml#ch2",
        "OEBPS/text/part 2.xhtml",
    ]
    assert book.cover is not None and book.cover.data.startswith(b"\xff\xd8")


@pytest.mark.parametrize("kind", ["markdown", "html"])
def test_markdown_and_html_chapters_at_headings(kind: str, books: dict[str, Path]) -> None:
    book = read_book(books[kind])
    assert (book.kind, book.title, book.author, book.language) == (kind, inputs.TITLE, inputs.AUTHOR, "en")
    assert _content(book) == EXPECTED


def test_markdown_and_html_without_a_charset_are_utf8(tmp_path: Path) -> None:
    """Non-ASCII text as written: lxml reads undeclared bytes as Latin-1 (mojibake) unless told."""
    text = "今日は良い天気です。Café, naïve."
    (tmp_path / "j.md").write_text(f"# 第一章\n\n{text}\n", encoding="utf-8")
    html = f"<html><body><h1>第一章</h1><p>{text}</p></body></html>"
    (tmp_path / "j.html").write_text(html, encoding="utf-8")
    latin = '<html><head><meta charset="iso-8859-1"></head><body><h1>Café</h1><p>Naïve.</p></body></html>'
    (tmp_path / "l.html").write_bytes(latin.encode("latin-1"))  # a declared charset is still the document's
    for name in ("j.md", "j.html"):
        chapters = read_book(tmp_path / name).chapters
        assert [(c.title, c.paragraphs) for c in chapters] == [("第一章", [text])]
    chapters = read_book(tmp_path / "l.html").chapters
    assert [(c.title, c.paragraphs) for c in chapters] == [("Café", ["Naïve."])]


def test_text_chapter_lines_form_feeds_and_page_numbers(books: dict[str, Path]) -> None:
    book = read_book(books["text"])
    assert book.kind == "text" and book.title == "tides"
    assert [c.title for c in book.chapters] == ["CHAPTER ONE", "Chapter 2: The Lighthouse", "The Return"]
    # the lines of a paragraph are joined; the lone "17" page numbers are dropped
    assert [c.paragraphs for c in book.chapters] == [p for _, p in EXPECTED]


def test_text_without_chapter_lines_is_one_chapter(tmp_path: Path) -> None:
    path = tmp_path / "story.txt"
    path.write_text("Once upon a time.\n\nThe end.\n", encoding="utf-8")
    book = read_book(path)
    assert [(c.title, c.paragraphs) for c in book.chapters] == [("", ["Once upon a time.", "The end."])]


def test_chapters_at_headings_rules() -> None:
    blocks = [
        Block("Book", 1),
        Block("Intro text."),
        Block("One", 2),
        Block("a."),
        Block("Two", 2),
        Block("b."),
    ]
    title, chapters = chapters_at_headings(blocks, "x")
    # one h1 first, h2s after: the h1 is the book's title, the text before the first h2 a chapter of its own
    assert title == "Book" and [(c.title, c.paragraphs) for c in chapters][0] == ("Book", ["Intro text."])
    assert [c.title for c in chapters] == ["Book", "One", "Two"]
    title, chapters = chapters_at_headings([Block("Book", 1), *blocks[2:]], "x")
    assert title == "Book" and [(c.title, c.paragraphs) for c in chapters] == [
        ("One", ["a."]),
        ("Two", ["b."]),
    ]
    title, chapters = chapters_at_headings([Block("A", 1), Block("s", 2), Block("t."), Block("B", 1)], "x")
    assert [c.title for c in chapters] == ["A", "B"] and chapters[0].paragraphs == ["s", "t."]
    assert chapters_at_headings([Block("Just text.")], "Fallback")[1][0].title == "Fallback"


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("corrupt", "is not a valid EPUB"),
        ("drm", "is DRM-protected: META-INF/encryption.xml encrypts 3 of its files"),
        ("bomb", "looks like a zip bomb"),
        ("entities", "declares XML entities"),
        ("empty", "has no text to read"),
    ],
)
def test_hostile_books_are_clear_errors(name: str, words: str, books: dict[str, Path]) -> None:
    with pytest.raises(UsageError) as caught:
        read_book(books[name])
    assert words in caught.value.message and caught.value.hint


def test_font_obfuscation_is_not_drm(books: dict[str, Path]) -> None:
    assert _content(read_book(books["fonts"])) == EXPECTED


def test_rights_files_external_entities_and_encodings(tmp_path: Path, books: dict[str, Path]) -> None:
    adobe = tmp_path / "adobe.epub"
    with zipfile.ZipFile(books["epub3"]) as source, zipfile.ZipFile(adobe, "w") as archive:
        for info in source.infolist():
            archive.writestr(info, source.read(info))
        archive.writestr("META-INF/rights.xml", "<rights/>")
    with pytest.raises(UsageError, match="DRM-protected .Adobe ADEPT"):
        read_book(adobe)
    html = tmp_path / "x.html"
    html.write_text(
        '<!DOCTYPE html [<!ENTITY x SYSTEM "file:///etc/passwd">]><html><body><p>&x;</p></body></html>'
    )
    with pytest.raises(UsageError, match="declares XML entities"):
        read_book(html)
    latin = tmp_path / "latin.txt"
    latin.write_bytes("Caf\xe9 au lait.".encode("latin-1"))
    with pytest.raises(UsageError, match="is not UTF-8 text") as caught:
        read_book(latin)
    assert "iconv" in (caught.value.hint or "")
    utf16 = tmp_path / "utf16.txt"
    utf16.write_text("Hello there.", encoding="utf-16")
    assert read_book(utf16).chapters[0].paragraphs == ["Hello there."]


def test_sentences_become_chunks() -> None:
    long = "This sentence runs on, " + ", ".join(f"clause number {i}" for i in range(30)) + "."
    chapter = Chapter("Chapter Nine", [Block("First one. Second one!"), Block("* * *"), Block(long)])
    plan = plan_chapter(chapter, 9, max_chars=120)
    assert [s.text for s in plan.sentences][:3] == ["Chapter Nine", "First one.", "Second one!"]
    assert plan.units[0].text == "Chapter Nine."  # the title is said with a falling tone
    assert [s.paragraph for s in plan.sentences] == [-1, 0, 0, 2]  # "* * *" is a pause, not a chunk
    pieces = [plan.units[i].text for i in plan.sentences[3].units]
    assert len(pieces) > 1 and all(len(p) <= 120 for p in pieces) and " ".join(pieces) == long
    untitled = plan_chapter(chapter, 9, titles=False)
    assert untitled.sentences[0].text == "First one."


def test_chapter_selection() -> None:
    assert parse_selection("3-5,8", 10) == [3, 4, 5, 8]
    assert parse_selection("2,1,2", 3) == [2, 1]
    assert parse_selection(None, 3) == [1, 2, 3]
    assert parse_selection("-2", 5) == [1, 2] and parse_selection("4-", 5) == [4, 5]
    for bad, words in (("0", "outside"), ("2-9", "outside"), ("3-1", "backwards"), ("x", "not a chapter")):
        with pytest.raises(UsageError, match=words):
            parse_selection(bad, 5)


def test_pause_markers_become_the_gap_before_the_next_sentence() -> None:
    from audiocpp.book.assemble import Pauses, assemble

    text = "Hello there. [pause 2s] After a pause. Then <break time='500ms'/> more."
    chapter = Chapter("One", [Block(text), Block("[pause 1s]"), Block("Last one.")])
    plan = plan_chapter(chapter, 1, titles=False)
    assert [(s.text, s.pause_before) for s in plan.sentences] == [
        ("Hello there.", None), ("After a pause.", 2.0), ("Then", None), ("more.", 0.5), ("Last one.", 1.0)]
    for i, unit in enumerate(plan.units):
        unit.key = str(i)
    rate = 1000
    built = assemble(plan, lambda key: np.ones(100, np.float32), rate, Pauses(sentence=0.3, paragraph=0.7))
    starts = [cue.start for cue in built.cues]
    # each sentence is 100 samples; the gaps before the next: 0.3 s (usual), the markers' 2 s, 0.5 s, 1 s
    assert np.diff(starts).tolist() == [100 + 2000, 100 + 300, 100 + 500, 100 + 1000]
    with pytest.raises(UsageError, match="SSML document"):
        plan_chapter(Chapter("Two", [Block("<speak>Hi.</speak>")]), 2)
