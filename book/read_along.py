"""The read-along book: an EPUB 3 with Media Overlays (SMIL), so that a reader (Thorium, Apple Books,
Readium-based apps) highlights each word (where the family times its words: Kokoro) or each sentence
while it is spoken.

The book is rebuilt from the text that was read: one XHTML document per chapter (its title a
heading, its paragraphs with every sentence in a ``<span id="cN-sM">``, and every timed word of it in a
``<span id="cN-sM-wK">`` inside), one SMIL file per chapter with a ``<par>`` per timed word (a
sentence whose words are not timed: one for the sentence) pairing its span with its clip
(``clipBegin`` / ``clipEnd``: its place in the chapter's audio, in order, never overlapping, clips
shorter than a millisecond left out), and the chapter's audio as AAC in MP4 (``audio/mp4``, a core
media type of EPUB 3). The package carries the title, author, language, cover, narrator, each
overlay's duration and the active class (``-epub-media-overlay-active``, styled in ``style.css``).
Inline formatting and the source's images (other than the cover) are not carried over.
"""

from __future__ import annotations

import datetime
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from .text import Cover

ACTIVE_CLASS = "-epub-media-overlay-active"
CSS = f"""body {{ font-family: serif; line-height: 1.5; margin: 1em; }}
h1 {{ font-size: 1.4em; margin: 1em 0; }}
p {{ text-indent: 1.2em; margin: 0 0 0.4em 0; }}
.{ACTIVE_CLASS} {{ background-color: #ffe97a; color: #000; }}
"""


@dataclass
class SpokenSentence:
    text: str
    paragraph: int  # -1: the chapter title
    start: float  # seconds in the chapter's audio
    end: float
    #: its timed words: (first char, end char) in ``text``, (start, end) in seconds; empty: not timed
    words: list[tuple[int, int, float, float]] = field(default_factory=list)


@dataclass
class ReadAlongChapter:
    number: int
    title: str
    sentences: list[SpokenSentence]
    duration: float
    audio: Path  # the chapter's AAC (.m4a)


def clock(seconds: float) -> str:
    """A SMIL full clock value, h:mm:ss.fff."""
    ms = round(seconds * 1000)
    return f"{ms // 3_600_000}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}"


def _xhtml(chapter: ReadAlongChapter, language: str) -> str:
    n = chapter.number
    head = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html>\n'
        f'<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" '
        f'lang={quoteattr(language)} xml:lang={quoteattr(language)}>\n<head>\n<meta charset="utf-8"/>\n'
        f"<title>{escape(chapter.title)}</title>\n"
        '<link rel="stylesheet" type="text/css" href="../style.css"/>\n</head>\n<body>\n'
        '<section epub:type="chapter">\n'
    )
    body: list[str] = []
    titled = any(s.paragraph < 0 for s in chapter.sentences)
    if not titled and chapter.title:
        body.append(f"<h1>{escape(chapter.title)}</h1>")
    paragraph: int | None = None
    spans: list[str] = []

    def close() -> None:
        if spans:
            tag = "h1" if paragraph is not None and paragraph < 0 else "p"
            body.append(f"<{tag}>" + " ".join(spans) + f"</{tag}>")
            spans.clear()

    for index, sentence in enumerate(chapter.sentences, start=1):
        if sentence.paragraph != paragraph:
            close()
            paragraph = sentence.paragraph
        spans.append(f'<span id="c{n}-s{index}">{_words_html(sentence, f"c{n}-s{index}")}</span>')
    close()
    return head + "\n".join(body) + "\n</section>\n</body>\n</html>\n"


def _words_html(sentence: SpokenSentence, sid: str) -> str:
    """The sentence's text, each timed word in its own ``<span id>``."""
    out, cursor = [], 0
    for k, (first, last, _, _) in enumerate(sentence.words, start=1):
        out.append(escape(sentence.text[cursor:first]))
        out.append(f'<span id="{sid}-w{k}">{escape(sentence.text[first:last])}</span>')
        cursor = last
    out.append(escape(sentence.text[cursor:]))
    return "".join(out)


def clips(chapter: ReadAlongChapter) -> list[tuple[str, int, int]]:
    """Every ``<par>`` of the chapter: (text fragment, clip begin, clip end in milliseconds), in order;
    each begins where the one before it ended or later, and one that would last less than a millisecond
    is left out (its text stays, unhighlighted)."""
    n = chapter.number
    out: list[tuple[str, int, int]] = []
    last = 0
    for i, sentence in enumerate(chapter.sentences, start=1):
        spans = [(f"c{n}-s{i}-w{k}", a, b) for k, (_, _, a, b) in enumerate(sentence.words, start=1)]
        for fragment, start, end in spans or [(f"c{n}-s{i}", sentence.start, sentence.end)]:
            begin, stop = max(round(start * 1000), last), round(end * 1000)
            if stop > begin:
                out.append((fragment, begin, stop))
                last = stop
    return out


def _smil(chapter: ReadAlongChapter) -> str:
    n = chapter.number
    text = f"../text/c{n:04d}.xhtml"
    audio = f"../audio/c{n:04d}.m4a"
    pars = [
        f'<par id="par-{fragment}"><text src="{text}#{fragment}"/>'
        f'<audio src="{audio}" clipBegin="{begin / 1000:.3f}s" clipEnd="{end / 1000:.3f}s"/></par>'
        for fragment, begin, end in clips(chapter)
    ]
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<smil xmlns="http://www.w3.org/ns/SMIL" xmlns:epub="http://www.idpf.org/2007/ops" version="3.0">\n'
        f'<body>\n<seq id="seq-c{n}" epub:textref="{text}" epub:type="chapter">\n'
        + "\n".join(pars)
        + "\n</seq>\n</body>\n</smil>\n"
    )


def _nav(chapters: list[ReadAlongChapter], title: str, language: str) -> str:
    items = "\n".join(
        f'<li><a href="text/c{c.number:04d}.xhtml">{escape(c.title or f"Chapter {c.number}")}</a></li>'
        for c in chapters
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html>\n'
        '<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" '
        f"lang={quoteattr(language)} xml:lang={quoteattr(language)}>\n"
        f'<head><meta charset="utf-8"/><title>{escape(title)}</title></head>\n<body>\n'
        f'<nav epub:type="toc" id="toc"><h1>{escape(title)}</h1>\n<ol>\n{items}\n</ol>\n</nav>\n'
        "</body>\n</html>\n"
    )


def _opf(
    chapters: list[ReadAlongChapter],
    *,
    title: str,
    author: str,
    language: str,
    narrator: str,
    identifier: str,
    cover: Cover | None,
) -> str:
    modified = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    meta = [
        f'<dc:identifier id="bookid">{escape(identifier)}</dc:identifier>',
        f"<dc:title>{escape(title)}</dc:title>",
        f"<dc:language>{escape(language)}</dc:language>",
        f'<meta property="dcterms:modified">{modified}</meta>',
    ]
    if author:
        meta.append(f"<dc:creator>{escape(author)}</dc:creator>")
    if narrator:
        meta.append(f'<meta property="media:narrator">{escape(narrator)}</meta>')
    meta.append(f'<meta property="media:active-class">{ACTIVE_CLASS}</meta>')
    for c in chapters:
        meta.append(f'<meta property="media:duration" refines="#smil-c{c.number}">{clock(c.duration)}</meta>')
    meta.append(f'<meta property="media:duration">{clock(sum(c.duration for c in chapters))}</meta>')
    items = [
        '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>',
        '<item id="css" href="style.css" media-type="text/css"/>',
    ]
    if cover is not None:
        meta.append('<meta name="cover" content="cover-image"/>')
        items.append(
            f'<item id="cover-image" href="images/cover{cover.extension}" media-type="{cover.media_type}" '
            'properties="cover-image"/>'
        )
    spine = []
    for c in chapters:
        n = c.number
        items += [
            f'<item id="c{n}" href="text/c{n:04d}.xhtml" media-type="application/xhtml+xml" '
            f'media-overlay="smil-c{n}"/>',
            f'<item id="smil-c{n}" href="smil/c{n:04d}.smil" media-type="application/smil+xml"/>',
            f'<item id="audio-c{n}" href="audio/c{n:04d}.m4a" media-type="audio/mp4"/>',
        ]
        spine.append(f'<itemref idref="c{n}"/>')
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="bookid" '
        f"xml:lang={quoteattr(language)}>\n"
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/">\n' + "\n".join(meta) + "\n</metadata>\n"
        "<manifest>\n" + "\n".join(items) + "\n</manifest>\n"
        "<spine>\n" + "\n".join(spine) + "\n</spine>\n</package>\n"
    )


CONTAINER = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">\n'
    '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
    "</rootfiles>\n</container>\n"
)


def write_read_along(
    out: Path,
    chapters: list[ReadAlongChapter],
    *,
    title: str,
    author: str,
    language: str,
    narrator: str,
    cover: Cover | None,
    seed_text: str,
) -> None:
    """The EPUB 3 at ``out`` (the caller renames it into place)."""
    language = language or "und"
    identifier = f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, 'audiocpp-book:' + seed_text)}"
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr(
            zipfile.ZipInfo("mimetype"), "application/epub+zip", compress_type=zipfile.ZIP_STORED
        )

        def put(name: str, data: str | bytes) -> None:
            archive.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED)

        put("META-INF/container.xml", CONTAINER)
        put(
            "OEBPS/content.opf",
            _opf(
                chapters,
                title=title,
                author=author,
                language=language,
                narrator=narrator,
                identifier=identifier,
                cover=cover,
            ),
        )
        put("OEBPS/nav.xhtml", _nav(chapters, title, language))
        put("OEBPS/style.css", CSS)
        if cover is not None:
            put(f"OEBPS/images/cover{cover.extension}", cover.data)
        for chapter in chapters:
            n = chapter.number
            put(f"OEBPS/text/c{n:04d}.xhtml", _xhtml(chapter, language))
            put(f"OEBPS/smil/c{n:04d}.smil", _smil(chapter))
            archive.write(chapter.audio, f"OEBPS/audio/c{n:04d}.m4a", compress_type=zipfile.ZIP_STORED)
