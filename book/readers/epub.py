"""EPUB 2 and 3: metadata, cover and chapters from the package document and its table of contents.

The container names the package document (OPF); its metadata gives the title, author, language
and cover image; its spine the reading order. Chapters are the entries of the navigation document
(EPUB 3, ``<nav epub:type="toc">``) or else of the NCX (EPUB 2), down to the second level, placed in
spine order: a chapter runs from its entry's place (a document, or an element id in it) to the next
entry's. What comes before the first entry (cover and title pages) is not read. A book without a
usable table of contents has a chapter per spine document, titled by its first heading.

DRM: a book whose ``META-INF/encryption.xml`` encrypts anything but fonts (the IDPF and Adobe font
obfuscations are allowed), or that carries Adobe (``rights.xml``), Readium LCP (``license.lcpl``) or
Apple (``sinf.xml``) rights files, is refused with what was found.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from audiocpp.engine.errors import UsageError

from ..safety import SafeZip, parse_xml
from ..text import Block, BookText, Chapter, Cover, drop_duplicate_heading, image_type, normalize_text
from .markup import local_name, walk

NS = {
    "c": "urn:oasis:names:tc:opendocument:xmlns:container",
    "opf": "http://www.idpf.org/2007/opf",
    "dc": "http://purl.org/dc/elements/1.1/",
    "ncx": "http://www.daisy.org/z3986/2005/ncx/",
    "x": "http://www.w3.org/1999/xhtml",
    "enc": "http://www.w3.org/2001/04/xmlenc#",
}
_EPUB_TYPE = "{http://www.idpf.org/2007/ops}type"
ENC_DATA = "{http://www.w3.org/2001/04/xmlenc#}EncryptedData"
OPF_ROLE = "{http://www.idpf.org/2007/opf}role"
#: font obfuscation, not DRM: fonts only, keyed by the book's identifier
FONT_OBFUSCATION = ("http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC")
RIGHTS_FILES = {
    "META-INF/rights.xml": "Adobe ADEPT",
    "META-INF/license.lcpl": "Readium LCP",
    "META-INF/sinf.xml": "Apple FairPlay",
}
DRM_HINT = (
    "audiocpp reads DRM-free books only: use a DRM-free edition (many publishers and stores sell "
    "them; Project Gutenberg and Standard Ebooks are free), or an export you are entitled to make"
)
TOC_DEPTH = 2
MAX_COVER_BYTES = 16 << 20


@dataclass
class _Entry:
    title: str
    href: str  # the member name in the ZIP
    fragment: str
    depth: int


def read_epub(path: Path) -> BookText:
    archive = SafeZip(path, "EPUB")
    try:
        return _Reader(archive).read()
    finally:
        archive.close()


class _Reader:
    def __init__(self, archive: SafeZip) -> None:
        self.zip = archive
        self.name = archive.name

    def xml(self, member: str, *, content: bool = False) -> Any:
        return parse_xml(self.zip.read(member), f"{self.name!r}: {member!r}", html_fallback=content)

    def read(self) -> BookText:
        self.check_drm()
        opf_path = self.package_path()
        opf = self.xml(opf_path)
        if local_name(opf.tag) != "package":
            raise UsageError(
                f"{self.name!r} is not a valid EPUB: {opf_path!r} is not a package document",
                hint=self.zip.fix,
            )
        base = posixpath.dirname(opf_path)
        version = (opf.get("version") or "2.0").strip()
        manifest: dict[str, dict[str, str]] = {}
        for item in opf.iterfind("opf:manifest/opf:item", NS):
            href = item.get("href")
            if item.get("id") and href:
                manifest[item.get("id")] = {
                    "href": _join(base, href),
                    "type": item.get("media-type") or "",
                    "properties": item.get("properties") or "",
                }
        spine_el = opf.find("opf:spine", NS)
        if spine_el is None:
            raise UsageError(
                f"{self.name!r} is not a valid EPUB: its package document has no spine", hint=self.zip.fix
            )
        spine = [
            manifest[ref.get("idref")]["href"]
            for ref in spine_el.iterfind("opf:itemref", NS)
            if ref.get("idref") in manifest and (ref.get("linear") or "yes") != "no"
        ]
        spine = [href for href in dict.fromkeys(spine) if href in self.zip]
        meta = opf.find("opf:metadata", NS)
        title, author, language = self.metadata(meta)
        book = BookText(
            title=title or Path(self.zip.path).stem,
            author=author,
            language=language,
            kind="epub3" if version.startswith("3") else "epub2",
        )
        book.cover = self.cover(meta, manifest, book)
        entries = self.toc(manifest, spine_el, book)
        documents = {href: walk(self.xml(href, content=True)) for href in spine}
        book.chapters = self.chapters(spine, documents, entries)
        return book

    # -- container, DRM, metadata ------------------------------------------------------------------
    def package_path(self) -> str:
        container = self.xml("META-INF/container.xml")
        for rootfile in container.iterfind(".//c:rootfile", NS):
            full = rootfile.get("full-path")
            media = rootfile.get("media-type") or "application/oebps-package+xml"
            if full and media == "application/oebps-package+xml":
                full = unquote(full)
                if full not in self.zip:
                    raise UsageError(
                        f"{self.name!r} is not a valid EPUB: its package document {full!r} is missing",
                        hint=self.zip.fix,
                    )
                return full
        raise UsageError(
            f"{self.name!r} is not a valid EPUB: META-INF/container.xml names no package document",
            hint=self.zip.fix,
        )

    def check_drm(self) -> None:
        for member, scheme in RIGHTS_FILES.items():
            if member in self.zip:
                raise UsageError(
                    f"{self.name!r} is DRM-protected ({scheme}: it carries {member})", hint=DRM_HINT
                )
        if "META-INF/encryption.xml" not in self.zip:
            return
        root = self.xml("META-INF/encryption.xml")
        encrypted: list[tuple[str, str]] = []
        for data in root.iter(ENC_DATA):
            method = data.find("enc:EncryptionMethod", NS)
            algorithm = method.get("Algorithm", "") if method is not None else ""
            reference = data.find("enc:CipherData/enc:CipherReference", NS)
            uri = unquote(reference.get("URI", "")) if reference is not None else ""
            if algorithm not in FONT_OBFUSCATION:
                encrypted.append((uri, algorithm))
        if encrypted:
            uri, algorithm = encrypted[0]
            raise UsageError(
                f"{self.name!r} is DRM-protected: META-INF/encryption.xml encrypts {len(encrypted)} "
                f"of its files (e.g. {uri!r} with {algorithm or 'an unnamed algorithm'})",
                hint=DRM_HINT,
            )

    def metadata(self, meta: Any) -> tuple[str, str, str]:
        if meta is None:
            return "", "", ""

        def first(tag: str) -> str:
            for element in meta.iterfind(f"dc:{tag}", NS):
                text = normalize_text("".join(element.itertext()))
                if text:
                    return text
            return ""

        authors = []
        for creator in meta.iterfind("dc:creator", NS):
            role = creator.get(OPF_ROLE) or self._refined_role(meta, creator.get("id"))
            text = normalize_text("".join(creator.itertext()))
            if text and role in (None, "", "aut"):
                authors.append(text)
        return first("title"), ", ".join(dict.fromkeys(authors)), first("language")

    @staticmethod
    def _refined_role(meta: Any, creator_id: str | None) -> str | None:
        if not creator_id:
            return None
        for element in meta.iterfind("opf:meta", NS):
            if element.get("refines") == f"#{creator_id}" and element.get("property") == "role":
                return normalize_text(element.text or "")
        return None

    def cover(self, meta: Any, manifest: dict[str, dict[str, str]], book: BookText) -> Cover | None:
        href = next(
            (item["href"] for item in manifest.values() if "cover-image" in item["properties"].split()), None
        )
        if href is None and meta is not None:
            for element in meta.iterfind("opf:meta", NS):
                if element.get("name") == "cover" and element.get("content") in manifest:
                    href = manifest[element.get("content")]["href"]
        if href is None:
            href = next(
                (
                    item["href"]
                    for key, item in manifest.items()
                    if item["type"].startswith("image/") and "cover" in (key + item["href"]).lower()
                ),
                None,
            )
        if href is None or href not in self.zip:
            return None
        data = self.zip.read(href, limit=MAX_COVER_BYTES)
        kind = image_type(data)
        if kind is None:
            book.notes.append(f"the cover {href!r} is not a JPEG or PNG image; the outputs have no cover")
            return None
        return Cover(data, kind)

    # -- the table of contents -----------------------------------------------------------------------
    def toc(self, manifest: dict[str, dict[str, str]], spine_el: Any, book: BookText) -> list[_Entry]:
        nav = next((item["href"] for item in manifest.values() if "nav" in item["properties"].split()), None)
        if nav is not None and nav in self.zip:
            entries = self.nav_entries(nav)
            if entries:
                return entries
        ncx_id = spine_el.get("toc")
        ncx = manifest.get(ncx_id, {}).get("href") if ncx_id else None
        if ncx is None:
            ncx = next(
                (item["href"] for item in manifest.values() if item["type"] == "application/x-dtbncx+xml"),
                None,
            )
        if ncx is not None and ncx in self.zip:
            entries = self.ncx_entries(ncx)
            if entries:
                return entries
        book.notes.append("no table of contents: a chapter per document of the spine")
        return []

    def nav_entries(self, href: str) -> list[_Entry]:
        root = self.xml(href, content=True)
        navs = [el for el in root.iter() if local_name(el.tag) == "nav"]
        toc = next(
            (el for el in navs if "toc" in (el.get(_EPUB_TYPE) or el.get("epub:type") or "").split()),
            navs[0] if navs else None,
        )
        if toc is None:
            return []
        entries: list[_Entry] = []
        base = posixpath.dirname(href)

        def visit(ol: Any, depth: int) -> None:
            for li in ol:
                if local_name(li.tag) != "li":
                    continue
                link = next((el for el in li if local_name(el.tag) in ("a", "span")), None)
                if link is not None and link.get("href"):
                    title = normalize_text("".join(link.itertext())) or normalize_text(
                        link.get("title") or ""
                    )
                    entries.append(self._entry(base, link.get("href"), title, depth))
                for child in li:
                    if local_name(child.tag) == "ol" and depth < TOC_DEPTH:
                        visit(child, depth + 1)

        top = next((el for el in toc if local_name(el.tag) == "ol"), None)
        if top is not None:
            visit(top, 1)
        return [entry for entry in entries if entry.href]

    def ncx_entries(self, href: str) -> list[_Entry]:
        root = self.xml(href)
        base = posixpath.dirname(href)
        entries: list[_Entry] = []

        def visit(parent: Any, depth: int) -> None:
            for point in parent.iterfind("ncx:navPoint", NS):
                label = point.find("ncx:navLabel/ncx:text", NS)
                content = point.find("ncx:content", NS)
                if content is not None and content.get("src"):
                    title = normalize_text("".join(label.itertext())) if label is not None else ""
                    entries.append(self._entry(base, content.get("src"), title, depth))
                if depth < TOC_DEPTH:
                    visit(point, depth + 1)

        nav_map = root.find("ncx:navMap", NS)
        if nav_map is not None:
            visit(nav_map, 1)
        return [entry for entry in entries if entry.href]

    @staticmethod
    def _entry(base: str, href: str, title: str, depth: int) -> _Entry:
        parts = urlsplit(href)
        if parts.scheme or parts.netloc:
            return _Entry(title, "", "", depth)  # a link out of the book
        return _Entry(title, _join(base, parts.path) if parts.path else "", unquote(parts.fragment), depth)

    # -- chapters ------------------------------------------------------------------------------------
    def chapters(self, spine: list[str], documents: dict[str, Any], entries: list[_Entry]) -> list[Chapter]:
        order = {href: i for i, href in enumerate(spine)}
        starts: dict[tuple[int, int], _Entry] = {}
        for entry in entries:
            if entry.href not in order:
                continue
            walked = documents[entry.href]
            block = walked.anchors.get(entry.fragment, 0) if entry.fragment else 0
            starts.setdefault((order[entry.href], block), entry)
        if not starts:  # no usable table of contents: a chapter per spine document
            out = []
            for index, href in enumerate(spine):
                blocks = documents[href].blocks
                heading = next((b.text for b in blocks if b.is_heading), "")
                title = heading or f"Chapter {len(out) + 1}"
                body = drop_duplicate_heading(title, blocks)
                if body:
                    out.append(Chapter(title, body, f"{href} (spine item {index + 1})"))
            return out
        positions = sorted(starts)
        chapters: list[Chapter] = []
        for i, (doc, block) in enumerate(positions):
            end = positions[i + 1] if i + 1 < len(positions) else (len(spine), 0)
            blocks: list[Block] = []
            headings = 0
            for d in range(doc, min(end[0], len(spine) - 1) + 1):
                walked = documents[spine[d]]
                lo = block if d == doc else 0
                hi = end[1] if d == end[0] else len(walked.blocks)
                blocks.extend(walked.blocks[lo:hi])
                headings += sum(1 for b in walked.blocks[lo:hi] if b.is_heading)
            entry = starts[(doc, block)]
            title = entry.title or next((b.text for b in blocks if b.is_heading), "") or f"Chapter {i + 1}"
            body = drop_duplicate_heading(title, blocks)
            if body or headings:  # a part page (a heading alone) is kept: its title is spoken
                source = spine[doc] + (f"#{entry.fragment}" if entry.fragment else "")
                chapters.append(Chapter(title, body, source))
        return chapters


def _join(base: str, href: str) -> str:
    return posixpath.normpath(posixpath.join(base, unquote(href))).lstrip("/")
