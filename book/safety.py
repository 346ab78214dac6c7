"""Reading untrusted containers and markup within bounds.

- :class:`SafeZip`: an EPUB's ZIP read member by member, each within a size cap, with the ratio
  of a member's size to its compressed size and the number of members bounded (a zip bomb is an
  error before anything is inflated), and every ZIP failure (bad CRC, truncated data, an unknown
  compression method, a password) one :class:`UsageError` naming the file.
- :func:`parse_xml` / :func:`parse_html`: lxml with entity expansion, DTD loading and network
  access off. A document that declares entities (``<!ENTITY``: "billion laughs", external files)
  is refused, not parsed; entity references left in a document (XHTML's ``&nbsp;`` under its
  DOCTYPE) are mapped to their characters by the walker (HTML5's named entities), never expanded
  by the parser.
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path
from typing import Any

from audiocpp.engine.errors import UsageError

MAX_MEMBERS = 20_000
MAX_MEMBER_BYTES = 64 << 20  # one document or image, inflated
MAX_TOTAL_BYTES = 1 << 30  # everything the archive says it holds, inflated
MAX_RATIO = 200  # inflated / compressed, for members over RATIO_FLOOR bytes
RATIO_FLOOR = 1 << 20

_ENTITY_MARKS = (b"<!ENTITY", "<!ENTITY".encode("utf-16-le"), "<!ENTITY".encode("utf-16-be"))


class SafeZip:
    """A ZIP archive (an EPUB) opened for bounded reads of its members."""

    def __init__(self, path: Path, what: str = "EPUB") -> None:
        self.path = path
        self.name = str(path)
        self.what = what
        self.fix = f"pass an unmodified {what} file (re-download or re-export it)"
        try:
            self.zip = zipfile.ZipFile(path)
            infos = self.zip.infolist()
        except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, NotImplementedError) as error:
            raise UsageError(
                f"{self.name!r} is not a valid {what}: not a readable ZIP archive ({error})", hint=self.fix
            ) from None
        except OSError as error:
            raise UsageError(
                f"cannot read {self.name!r}: {error.strerror or error}",
                hint="check the path and its permissions",
            ) from None
        if len(infos) > MAX_MEMBERS:
            raise UsageError(
                f"{self.name!r} holds {len(infos)} files, more than an {what} has "
                f"(at most {MAX_MEMBERS} are read)",
                hint=self.fix,
            )
        total = sum(info.file_size for info in infos)
        if total > MAX_TOTAL_BYTES:
            raise UsageError(
                f"{self.name!r} looks like a zip bomb: its files would inflate to "
                f"{total / 2**30:.1f} GiB (at most {MAX_TOTAL_BYTES >> 30} GiB is read)",
                hint=self.fix,
            )
        self.infos = {info.filename: info for info in infos if not info.is_dir()}

    def __contains__(self, member: str) -> bool:
        return member in self.infos

    def names(self) -> list[str]:
        return list(self.infos)

    def read(self, member: str, limit: int = MAX_MEMBER_BYTES) -> bytes:
        """The bytes of ``member``, or a UsageError: missing, too large, a bomb, damaged, encrypted."""
        info = self.infos.get(member)
        if info is None:
            raise UsageError(f"{self.name!r} is not a valid {self.what}: it has no {member!r}", hint=self.fix)
        if info.flag_bits & 0x1:
            raise UsageError(
                f"{self.name!r} is password-protected ({member!r} is encrypted in the ZIP)",
                hint="use a copy without a password (a DRM-free edition)",
            )
        if info.file_size > limit:
            raise UsageError(
                f"{self.name!r}: {member!r} would inflate to {info.file_size / 2**20:.0f} MiB, "
                f"more than the {limit >> 20} MiB read of one file",
                hint=self.fix,
            )
        if info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
            raise UsageError(
                f"{self.name!r} looks like a zip bomb: {member!r} inflates "
                f"{info.file_size // max(info.compress_size, 1)} times "
                f"({info.compress_size} to {info.file_size} bytes)",
                hint=self.fix,
            )
        try:
            with self.zip.open(info) as handle:
                data = handle.read(limit + 1)
        except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, NotImplementedError) as error:
            raise UsageError(
                f"{self.name!r} is not a valid {self.what}: {member!r} cannot be read ({error})",
                hint=self.fix,
            ) from None
        except RuntimeError as error:  # "File ... is encrypted, password required"
            raise UsageError(
                f"{self.name!r}: {member!r} cannot be read ({error})",
                hint="use a copy without a password (a DRM-free edition)",
            ) from None
        except OSError as error:
            raise UsageError(f"cannot read {self.name!r}: {error.strerror or error}") from None
        if len(data) > limit:
            raise UsageError(f"{self.name!r}: {member!r} inflates beyond {limit >> 20} MiB", hint=self.fix)
        return data

    def close(self) -> None:
        self.zip.close()


def declares_entities(data: bytes) -> bool:
    """Whether a document declares XML entities (in its DOCTYPE's internal subset)."""
    return any(mark in data for mark in _ENTITY_MARKS) or b"<!entity" in data.lower()[:65536]


def entity_error(name: str) -> UsageError:
    return UsageError(
        f"{name} declares XML entities (<!ENTITY ...>), which audiocpp does not expand: a 'billion laughs' "
        "document inflates to gigabytes and an external entity reads other files",
        hint="remove the <!DOCTYPE ... [ <!ENTITY ...> ]> declarations (or use the publisher's unmodified "
        "file); named characters such as &nbsp; need no declaration",
    )


def parse_xml(data: bytes, name: str, *, html_fallback: bool = False) -> Any:
    """The root element of the XML ``data`` (lxml), parsed without entity expansion, DTDs or network.

    ``html_fallback``: a content document that is not well-formed XML is read with lxml's HTML
    parser instead (readers are lenient there too); anything else is an error naming the line."""
    from lxml import etree

    if declares_entities(data):
        raise entity_error(name)
    parser = etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
    )
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as error:
        if html_fallback:
            return parse_html(data, name)
        raise UsageError(
            f"{name} is not well-formed XML: {error}", hint="the file is damaged; use an unmodified copy"
        ) from None
    if root is None:
        raise UsageError(f"{name} is empty", hint="the file is damaged; use an unmodified copy")
    return root


def html_encoding(data: bytes) -> str | None:
    """UTF-8 for a document that declares no encoding (no BOM, no ``charset``) and decodes as UTF-8:
    lxml reads such bytes as Latin-1, which turns every non-ASCII letter into mojibake; None (lxml
    decides) when the document declares one, or is not UTF-8."""
    if data.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")) or b"charset" in data[:4096].lower():
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return "utf-8"


def parse_html(data: bytes, name: str) -> Any:
    """The root of an HTML document (lxml.html), entity declarations refused as for XML."""
    import lxml.html
    from lxml import etree

    if declares_entities(data):
        raise entity_error(name)
    parser = lxml.html.HTMLParser(
        no_network=True,
        remove_comments=True,
        remove_pis=True,
        huge_tree=False,
        encoding=html_encoding(data),
    )
    try:
        root = lxml.html.document_fromstring(data, parser=parser)
    except (etree.ParserError, etree.XMLSyntaxError, ValueError) as error:
        raise UsageError(
            f"{name} is not readable HTML: {error}", hint="check that it is an HTML file"
        ) from None
    return root
