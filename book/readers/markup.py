"""The text of an (X)HTML document as blocks: headings and paragraphs, in reading order.

The walk (lxml's ``iterwalk``: no recursion, so nesting depth is no attack) keeps paragraphs and
headings and drops what is not read aloud: scripts, styles, images, SVG and MathML, forms, a
navigation document's table of contents, page-break markers (``epub:type="pagebreak"``,
``role="doc-pagebreak"``) and footnote markers (``epub:type="noteref"``, ``role="doc-noteref"``,
a superscript or a link that is only a number or a mark such as ``*`` or ``†``). Element ids are
recorded with the index of the block they start, so a table of contents' ``file#id`` finds its
place.
"""

from __future__ import annotations

import html.entities
import re
from dataclasses import dataclass, field
from typing import Any

from ..text import Block, normalize_text

_EPUB_TYPE = "{http://www.idpf.org/2007/ops}type"
BLOCK_TAGS = frozenset(
    (
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "caption",
        "center",
        "dd",
        "details",
        "div",
        "dl",
        "dt",
        "figcaption",
        "figure",
        "footer",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "li",
        "main",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "ul",
    )
)
SKIP_TAGS = frozenset(
    (
        "audio",
        "button",
        "canvas",
        "embed",
        "form",
        "head",
        "iframe",
        "img",
        "input",
        "map",
        "math",
        "noscript",
        "object",
        "picture",
        "rp",
        "rt",
        "script",
        "select",
        "source",
        "style",
        "svg",
        "template",
        "textarea",
        "title",
        "track",
        "video",
    )
)
_SKIP_TYPES = frozenset(("pagebreak", "noteref", "toc", "landmarks", "page-list", "annoref", "biblioref"))
_SKIP_ROLES = frozenset(("doc-pagebreak", "doc-noteref", "doc-toc", "doc-biblioref"))
#: a footnote mark: 1-3 digits or letters, or *, †, ‡, §, maybe in brackets
_MARK = re.compile(r"[\[(]?(?:\d{1,3}|[a-z]|[*†‡§¶]{1,3})[\])]?")


def local_name(tag: Any) -> str:
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1].lower()


def _types(element: Any) -> set[str]:
    value = element.get(_EPUB_TYPE) or element.get("epub:type") or ""
    return set(value.split())


def _skipped(element: Any, name: str) -> bool:
    if name in SKIP_TAGS:
        return True
    if name == "nav" and _types(element) & {"toc", "landmarks", "page-list"}:
        return True
    if _types(element) & _SKIP_TYPES or (element.get("role") or "") in _SKIP_ROLES:
        return True
    if element.get("hidden") is not None or element.get("aria-hidden") == "true" and name in ("span", "a"):
        return True
    if name in ("sup", "a"):
        text = normalize_text("".join(element.itertext()))
        if name == "sup" and _MARK.fullmatch(text):
            return True
        if (
            name == "a"
            and "#" in (element.get("href") or "")
            and _MARK.fullmatch(text)
            and text[:1] in "[(0123456789"
        ):
            return True
    return False


@dataclass
class Walked:
    """A document's blocks, and where each element id starts: id -> index of the next block."""

    blocks: list[Block] = field(default_factory=list)
    anchors: dict[str, int] = field(default_factory=dict)
    headings: int = 0  # headings met, kept or not (a part page's only content)


def walk(root: Any) -> Walked:
    """The blocks of the document whose root (or body) is ``root``."""
    from lxml import etree

    out = Walked()
    parts: list[str] = []
    heading = [0]  # the level of the block being gathered (0: a paragraph)
    pending_ids: list[str] = []

    def flush() -> None:
        text = normalize_text("".join(parts))
        parts.clear()
        for anchor in pending_ids:
            out.anchors.setdefault(anchor, len(out.blocks))
        pending_ids.clear()
        if text:
            out.blocks.append(Block(text, heading[0]))
        heading[0] = 0

    body = next((el for el in root.iter() if local_name(el.tag) == "body"), root)
    walker = etree.iterwalk(body, events=("start", "end"))
    for event, element in walker:
        tag = element.tag
        if tag is etree.Entity:  # an entity reference the parser left alone (&nbsp; under XHTML's DOCTYPE)
            if event == "start":
                parts.append(html.entities.html5.get(f"{element.name};", ""))
                parts.append(element.tail or "")
            continue
        name = local_name(tag)
        if event == "start":
            if _skipped(element, name):
                walker.skip_subtree()
                element.set("data-audiocpp-skipped", "1")  # its end event only adds the tail
                continue
            for key in ("id", "name") if name == "a" else ("id",):
                value = element.get(key)
                if value:
                    pending_ids.append(value)
            if name in BLOCK_TAGS or name == "br":
                if name == "br":
                    parts.append(" ")
                else:
                    flush()
            if name in ("h1", "h2", "h3", "h4", "h5", "h6"):
                heading[0] = int(name[1])
                out.headings += 1
            parts.append(element.text or "")
        else:
            skipped = element.attrib.pop("data-audiocpp-skipped", None) is not None
            if not skipped and name in BLOCK_TAGS:
                flush()
            if element is not body:
                parts.append(element.tail or "")
    flush()
    return out
