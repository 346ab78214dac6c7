"""Books the tests write themselves: an EPUB 3 (ebooklib), an EPUB 2 with an NCX (zipfile), Markdown,
HTML and plain text, three chapters each, and the hostile ones (damaged, DRM, a zip bomb, XML entities,
no text)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

#: the three chapters every input holds: (title, paragraphs); each paragraph of sentences
CHAPTERS = [
    (
        "The Harbour",
        [
            "The ship came in at dawn. Gulls cried over the water.",
            "Nobody on the quay said a word about the storm.",
        ],
    ),
    (
        "The Lighthouse",
        [
            "A light burned at the top of the tower.",
            "Its keeper had not slept for three nights. He wrote everything down.",
        ],
    ),
    ("The Return", ["At last the wind fell. The town woke to a quiet sea."]),
]
TITLE = "Tides of the North"
AUTHOR = "Ada Quill"


def cover_jpeg(color: tuple[int, int, int] = (180, 40, 40)) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (48, 64), color).save(buffer, "JPEG")
    return buffer.getvalue()


def _xhtml_paragraphs(paragraphs: list[str], number: int) -> str:
    out = []
    for i, paragraph in enumerate(paragraphs):
        # a footnote marker, a page number, an image and a script: none of it is read
        marker = f'<sup><a href="#fn{number}" epub:type="noteref">{i + 1}</a></sup>' if i == 0 else ""
        page = (
            f'<span epub:type="pagebreak" id="page{number}{i}" title="{number * 10 + i}"/>' if i == 0 else ""
        )
        out.append(f"<p>{paragraph}{marker}{page}</p>")
    out.append('<img src="figure.png" alt="A figure"/><script>var x = "not read";</script>')
    return "\n".join(out)


def write_epub3(path: Path, chapters=CHAPTERS, cover: bytes | None = None) -> Path:
    """An EPUB 3 written with ebooklib: navigation document, spine, metadata, cover."""
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("urn:uuid:test-tides")
    book.set_title(TITLE)
    book.set_language("en")
    book.add_author(AUTHOR)
    book.set_cover("cover.jpg", cover if cover is not None else cover_jpeg())
    items = []
    for number, (title, paragraphs) in enumerate(chapters, start=1):
        item = epub.EpubHtml(title=title, file_name=f"chap{number}.xhtml", lang="en")
        item.content = f"<h1>{title}</h1>\n{_xhtml_paragraphs(paragraphs, number)}"
        book.add_item(item)
        items.append(item)
    book.toc = items
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *items]
    epub.write_epub(str(path), book)
    return path


_OPF2 = """<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="2.0" unique-identifier="id">
<metadata xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:opf="http://www.idpf.org/2007/opf">
<dc:title>{title}</dc:title><dc:creator opf:role="aut">{author}</dc:creator>
<dc:creator opf:role="edt">An Editor</dc:creator>
<dc:language>en-GB</dc:language><dc:identifier id="id">urn:test:epub2</dc:identifier>
<meta name="cover" content="cover"/>
</metadata>
<manifest>
<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>
<item id="cover" href="images/cover.jpg" media-type="image/jpeg"/>
<item id="titlepage" href="text/title.xhtml" media-type="application/xhtml+xml"/>
<item id="part1" href="text/part1.xhtml" media-type="application/xhtml+xml"/>
<item id="part2" href="text/part%202.xhtml" media-type="application/xhtml+xml"/>
</manifest>
<spine toc="ncx"><itemref idref="titlepage"/><itemref idref="part1"/><itemref idref="part2"/></spine>
</package>
"""

_XHTML11 = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.1//EN" "http://www.w3.org/TR/xhtml11/DTD/xhtml11.dtd">
<html xmlns="http://www.w3.org/1999/xhtml"><head><title>x</title><style>p {{ margin: 0 }}</style></head>
<body>{body}</body></html>
"""


def write_epub2(path: Path, chapters=CHAPTERS) -> Path:
    """An EPUB 2 written with zipfile: OPF 2.0, an NCX, XHTML 1.1 with &nbsp; (its DOCTYPE's entity), two
    chapters in one document (the NCX points at their anchors) and a title page before the first."""

    def chapter_html(number: int) -> str:
        title, paragraphs = chapters[number - 1]
        body = "".join(f"<p>{p.replace('. ', '.&nbsp; ', 1)}</p>" for p in paragraphs)
        return f'<h2><a id="ch{number}"></a>{title}</h2><div class="page">12</div>{body}'.replace(
            '<div class="page">12</div>', '<span class="pagenum" epub:type="pagebreak">12</span>'
        )

    points = "".join(
        f'<navPoint id="n{n}" playOrder="{n}"><navLabel><text>{chapters[n - 1][0]}</text></navLabel>'
        f'<content src="{src}"/></navPoint>'
        for n, src in ((1, "text/part1.xhtml#ch1"), (2, "text/part1.xhtml#ch2"), (3, "text/part%202.xhtml"))
    )
    ncx = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">'
        f"<head/><docTitle><text>{TITLE}</text></docTitle><navMap>{points}</navMap></ncx>"
    )
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(
            zipfile.ZipInfo("mimetype"), "application/epub+zip", compress_type=zipfile.ZIP_STORED
        )
        archive.writestr(
            "META-INF/container.xml",
            '<?xml version="1.0"?><container version="1.0" '
            'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
            '<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
            "</rootfiles></container>",
        )
        archive.writestr("OEBPS/content.opf", _OPF2.format(title=TITLE, author=AUTHOR))
        archive.writestr("OEBPS/toc.ncx", ncx)
        archive.writestr("OEBPS/images/cover.jpg", cover_jpeg((20, 90, 160)))
        archive.writestr("OEBPS/text/title.xhtml", _XHTML11.format(body=f"<h1>{TITLE}</h1><p>{AUTHOR}</p>"))
        archive.writestr("OEBPS/text/part1.xhtml", _XHTML11.format(body=chapter_html(1) + chapter_html(2)))
        archive.writestr("OEBPS/text/part 2.xhtml", _XHTML11.format(body=chapter_html(3)))
    return path


def write_markdown(path: Path, chapters=CHAPTERS) -> Path:
    lines = ["---", f"title: {TITLE}", f"author: {AUTHOR}", "lang: en", "---", "", f"# {TITLE}", ""]
    for title, paragraphs in chapters:
        lines += [f"## {title}", ""]
        for paragraph in paragraphs:
            lines += [paragraph + " ![a figure](figure.png)", ""]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def write_text(path: Path, chapters=CHAPTERS) -> Path:
    """Hard-wrapped plain text: CHAPTER ONE / Chapter 2 / a form feed, page numbers between."""
    heads = ["CHAPTER ONE", "Chapter 2: The Lighthouse", None]
    parts = []
    for head, (title, paragraphs) in zip(heads, chapters):
        body = "\n\n".join(p.replace(". ", ".\n", 1) for p in paragraphs)  # a line break inside a paragraph
        parts.append((f"{head}\n\n" if head else f"{title}\n\n") + body + "\n\n17\n")
    path.write_text("\n\n".join(parts[:2]) + "\f" + parts[2], encoding="utf-8")
    return path


def write_html(path: Path, chapters=CHAPTERS) -> Path:
    body = "".join(f"<h1>{t}</h1>" + "".join(f"<p>{p}</p>" for p in ps) for t, ps in chapters)
    path.write_text(
        f'<!DOCTYPE html><html lang="en"><head><title>{TITLE}</title>'
        f'<meta name="author" content="{AUTHOR}"><script>alert(1)</script></head>'
        f"<body>{body}</body></html>",
        encoding="utf-8",
    )
    return path


# -- hostile inputs -------------------------------------------------------------------------------------
def write_corrupt_epub(path: Path, good: Path) -> Path:
    """A real EPUB cut in half (a download that stopped)."""
    data = good.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def _rewrite(
    good: Path, path: Path, extra: dict[str, bytes | str], replace: dict[str, str] | None = None
) -> Path:
    with zipfile.ZipFile(good) as source, zipfile.ZipFile(path, "w") as archive:
        for info in source.infolist():
            data = source.read(info)
            if replace and info.filename in replace:
                data = replace[info.filename].encode()
            archive.writestr(info, data)
        for name, data in extra.items():
            archive.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED)
    return path


def write_drm_epub(path: Path, good: Path) -> Path:
    """The EPUB with an encryption.xml that encrypts its chapters (as Adobe's and other DRM do)."""
    encryption = (
        '<?xml version="1.0"?><encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
        'xmlns:enc="http://www.w3.org/2001/04/xmlenc#">'
        + "".join(
            f'<enc:EncryptedData><enc:EncryptionMethod Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc"/>'
            f'<enc:CipherData><enc:CipherReference URI="EPUB/chap{n}.xhtml"/></enc:CipherData>'
            "</enc:EncryptedData>"
            for n in (1, 2, 3)
        )
        + "</encryption>"
    )
    return _rewrite(good, path, {"META-INF/encryption.xml": encryption})


def write_font_obfuscated_epub(path: Path, good: Path) -> Path:
    """Font obfuscation only (IDPF): not DRM, the book reads."""
    encryption = (
        '<?xml version="1.0"?><encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
        'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>'
        '<enc:EncryptionMethod Algorithm="http://www.idpf.org/2008/embedding"/>'
        '<enc:CipherData><enc:CipherReference URI="EPUB/fonts/a.otf"/></enc:CipherData>'
        "</enc:EncryptedData></encryption>"
    )
    return _rewrite(good, path, {"META-INF/encryption.xml": encryption})


def write_zip_bomb(path: Path, good: Path) -> Path:
    """The EPUB with a chapter that inflates 20 MiB of spaces from about 20 KiB."""
    with zipfile.ZipFile(good) as source, zipfile.ZipFile(path, "w") as archive:
        for info in source.infolist():
            if info.filename == "EPUB/chap2.xhtml":
                archive.writestr(info.filename, b" " * (20 << 20), compress_type=zipfile.ZIP_DEFLATED)
            else:
                archive.writestr(info, source.read(info))
    return path


def write_entity_epub(path: Path, good: Path) -> Path:
    """A chapter declaring a 'billion laughs' of XML entities."""
    laughs = (
        '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html [\n<!ENTITY lol "lol">\n'
        + "".join(
            f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">\n'
            for i in range(1, 10)
        )
        + ']>\n<html xmlns="http://www.w3.org/1999/xhtml"><head><title>x</title></head>'
        "<body><h1>The Lighthouse</h1><p>&lol9;</p></body></html>"
    )
    return _rewrite(good, path, {}, replace={"EPUB/chap2.xhtml": laughs})


def write_empty_epub(path: Path) -> Path:
    """An EPUB whose chapters hold only images."""
    return write_epub3(path, chapters=[("Plate 1", []), ("Plate 2", [])])
