"""Pauses and SSML's basics in request text: what Kokoro-FastAPI and the cloud APIs accept.

A request's text becomes a *script*, speech and silence in order, when it holds markup:

- ``[pause 0.5s]``, ``[pause 500ms]``, ``[pause 2]`` (seconds), ``[pause:1.5s]``; ``[pause]`` alone is
  :data:`DEFAULT_PAUSE` seconds;
- a bare ``<break time="500ms"/>`` (or ``strength="strong"``) in plain text;
- an SSML document, text that starts with ``<speak``: ``<break>``, ``<p>`` (paragraphs, with
  :data:`PARAGRAPH_PAUSE` seconds between them), ``<s>`` (a sentence, synthesized on its own) and
  ``<sub alias="...">`` (the alias is read) are honoured; ``<emphasis>``, ``<prosody>``, ``<say-as>``,
  ``<lang>``, ``<voice>`` and ``<phoneme>`` have their text read as written, with a warning that the tag
  itself is not honoured; ``<mark>`` is skipped; any other tag is refused with a clear error.

Text without markup gives no script (:func:`parse_markup` returns None): it is synthesized exactly
as before. The engine synthesizes each speech part as its own request of the family and splices the
silences in between (engine/session.py).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

from ..errors import AudiocppWarning, UsageError

#: Seconds of ``[pause]`` without a length.
DEFAULT_PAUSE = 0.5
#: Seconds between SSML paragraphs (``<p>``): ``audiocpp book``'s default paragraph pause.
PARAGRAPH_PAUSE = 0.8
#: The longest pause one marker may ask for.
MAX_PAUSE = 30.0
#: SSML ``<break strength>`` in seconds (the values of Azure's and Google's services); ``<break/>`` with
#: neither attribute is ``medium``.
BREAK_STRENGTH = {"none": 0.0, "x-weak": 0.25, "weak": 0.5, "medium": 0.75, "strong": 1.0, "x-strong": 1.25}
#: SSML tags whose text is read as written, the tag itself not honoured (a warning says so).
READ_AS_TEXT = ("emphasis", "prosody", "say-as", "lang", "voice", "phoneme")
HONOURED = ("speak", "break", "p", "s", "sub", "mark")

_PAUSE = re.compile(r"\[pause(?:[\s:]+([^\]]*))?\]", re.IGNORECASE)
_BREAK = re.compile(r"<break\b([^<>]*?)/?>", re.IGNORECASE)
_ATTRIBUTE = re.compile(r"""([\w:-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')""")
_LENGTH = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s)?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Speech:
    """Text to speak, synthesized as one request of the family."""

    text: str


@dataclass(frozen=True)
class Pause:
    """Silence of ``seconds``."""

    seconds: float


Script = tuple[Speech | Pause, ...]


def is_ssml(text: str) -> bool:
    """Whether ``text`` is an SSML document (the sentence splitters of streamed text keep it whole)."""
    return text.lstrip().startswith("<speak")


def parse_markup(text: str) -> Script | None:
    """The script of ``text``, or None when it holds no markup (see the module docstring). A script
    holds at least one part; bad markup raises :class:`UsageError` naming it and the fix."""
    if is_ssml(text):
        script = _merged(_ssml(text))
        if not script:
            raise UsageError("the SSML holds nothing to say", hint="put text inside <speak>...</speak>")
        return script
    if not (_PAUSE.search(text) or _BREAK.search(text)):
        return None
    parts: list[Speech | Pause] = []
    position = 0
    for match in sorted([*_PAUSE.finditer(text), *_BREAK.finditer(text)], key=lambda m: m.start()):
        parts.append(Speech(text[position:match.start()]))
        if match.re is _PAUSE:
            parts.append(Pause(_pause_length(match.group(1), match.group(0))))
        else:
            found = _ATTRIBUTE.findall(match.group(1))
            attributes = {k.lower(): a or b for k, a, b in found}
            parts.append(Pause(_break_length(attributes, match.group(0))))
        position = match.end()
    parts.append(Speech(text[position:]))
    return _merged(parts)


def script_text(script: Script) -> str:
    """The script's speech, joined (what checks of the whole request read)."""
    return " ".join(part.text for part in script if isinstance(part, Speech))


def _merged(parts: list[Speech | Pause]) -> Script:
    """Blank speech dropped, whitespace collapsed, neighbouring pauses summed."""
    out: list[Speech | Pause] = []
    for part in parts:
        if isinstance(part, Speech):
            text = " ".join(part.text.split())
            if text:
                out.append(Speech(text))
        elif out and isinstance(out[-1], Pause):
            out[-1] = Pause(out[-1].seconds + part.seconds)
        elif part.seconds > 0:
            out.append(part)
    return tuple(out)


def _seconds(value: str, marker: str, *, default_unit: str) -> float:
    match = _LENGTH.match(value)
    if not match:
        raise UsageError(f"the pause {marker!r} has no valid length ({value.strip()!r})",
                         hint="write it like [pause 0.5s], [pause 500ms] or <break time=\"750ms\"/>")
    number, unit = float(match.group(1)), (match.group(2) or default_unit).lower()
    seconds = number / 1000 if unit == "ms" else number
    if seconds > MAX_PAUSE:
        raise UsageError(f"the pause {marker!r} is {seconds:g} s long, over the {MAX_PAUSE:g} s one may be",
                         hint=f"split it into pauses of at most {MAX_PAUSE:g} s")
    return seconds


def _pause_length(value: str | None, marker: str) -> float:
    if value is None or not value.strip():
        return DEFAULT_PAUSE
    return _seconds(value, marker, default_unit="s")


def _break_length(attributes: dict[str, str], marker: str) -> float:
    if "time" in attributes:
        return _seconds(attributes["time"], marker, default_unit="s")
    strength = attributes.get("strength", "medium").strip().lower()
    if strength not in BREAK_STRENGTH:
        raise UsageError(f"the break {marker!r} has an unknown strength {strength!r}",
                         hint="strength is one of " + ", ".join(BREAK_STRENGTH))
    return BREAK_STRENGTH[strength]


# -- SSML -----------------------------------------------------------------------------------------------
def _ssml(text: str) -> list[Speech | Pause]:
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(text.strip())
    except ET.ParseError as error:
        line, column = error.position
        raise UsageError(f"the SSML is not well-formed: {error.msg if hasattr(error, 'msg') else error} "
                         f"(line {line}, column {column + 1})",
                         hint="close every tag, and write a bare & as &amp; and < as &lt;") from None
    if _tag(root) != "speak":
        raise UsageError(f"the SSML's root is <{_tag(root)}>, not <speak>",
                         hint="wrap the text in <speak>...</speak>")
    walker = _Walker()
    walker.element(root)
    walker.flush()
    return walker.parts


def _tag(element: object) -> str:
    tag = str(getattr(element, "tag", ""))
    return tag.rsplit("}", 1)[-1].lower()


class _Walker:
    """Speech and pauses of an SSML tree, in document order."""

    def __init__(self) -> None:
        self.parts: list[Speech | Pause] = []
        self.words: list[str] = []
        self.paragraphs = 0
        self.unhonoured: list[str] = []

    def flush(self) -> None:
        if self.words:
            self.parts.append(Speech("".join(self.words)))
            self.words = []

    def element(self, node: object) -> None:
        tag = _tag(node)
        attributes = {k.rsplit("}", 1)[-1].lower(): v for k, v in getattr(node, "attrib", {}).items()}
        if tag == "break":
            self.flush()
            self.parts.append(Pause(_break_length(attributes, "<break>")))
        elif tag == "sub":
            if "alias" not in attributes:
                raise UsageError("an SSML <sub> has no alias",
                                 hint='write <sub alias="what to say">text</sub>')
            self.words.append(f" {attributes['alias']} ")
        elif tag == "mark":
            pass
        elif tag in ("p", "s", "speak"):
            self.flush()
            if tag == "p":
                if self.paragraphs:
                    self.parts.append(Pause(PARAGRAPH_PAUSE))
                self.paragraphs += 1
            self.children(node)
            self.flush()
        elif tag in READ_AS_TEXT:
            if tag not in self.unhonoured:
                self.unhonoured.append(tag)
                warnings.warn(f"SSML <{tag}> is not honoured: its text is read as written", AudiocppWarning,
                              stacklevel=2)
            self.children(node)
        else:
            raise UsageError(f"SSML <{tag}> is not supported",
                             hint="the tags honoured are <" + ">, <".join(HONOURED) + ">; the text of <"
                             + ">, <".join(READ_AS_TEXT) + "> is read as written")
        tail = getattr(node, "tail", None)
        if tail and tag != "speak":
            self.words.append(tail)

    def children(self, node: object) -> None:
        if getattr(node, "text", None):
            self.words.append(node.text)  # type: ignore[attr-defined]
        for child in node:  # type: ignore[attr-defined]
            self.element(child)
