"""Text that arrives in pieces (stdin, a WebSocket, Wyoming's streaming synthesis), cut into
sentences as soon as each is complete: the chunker of ``--text -``, the server's text streams.

:func:`sentence_end` finds the first complete sentence of a buffer; :func:`segments` takes every
complete one off it; :class:`SentenceStream` keeps the buffer between pieces.
"""

from __future__ import annotations

from .markup import is_ssml
from .punctuation import ABBREVIATIONS, CLOSERS, SENTENCE_END_SPACED, SENTENCE_END_WIDE


def sentence_end(buffer: str, final: bool) -> int:
    """The end of the first complete sentence in ``buffer`` (an index after its closing marks),
    or -1. A ``.!?…`` ends one only before whitespace (so the next character must have arrived,
    unless ``final``) and not after an abbreviation such as "Dr."; ``。！？`` end one at once; a
    blank line ends a paragraph."""
    i = 0
    n = len(buffer)
    while i < n:
        ch = buffer[i]
        if ch == "\n" and buffer[i + 1:i + 2] == "\n":
            return i + 1
        if ch in SENTENCE_END_WIDE or ch in SENTENCE_END_SPACED:
            j = i + 1
            while j < n and (buffer[j] in SENTENCE_END_SPACED or buffer[j] in CLOSERS):
                j += 1
            if ch in SENTENCE_END_WIDE and (j < n or final):
                return j
            if j < n and buffer[j].isspace():
                word = buffer[:i + 1].split()[-1] if buffer[:i + 1].split() else ""
                if word.lstrip("\"'“‘(") not in ABBREVIATIONS:
                    return j
            elif j >= n and not final:
                return -1
            i = j
            continue
        i += 1
    return -1


def segments(buffer: str, by_line: bool, final: bool) -> tuple[list[str], str]:
    """Complete segments of ``buffer`` and what is left of it. An SSML document (``<speak>`` ...
    ``</speak>``) is one segment whatever it holds (engine/text/markup.py reads its structure)."""
    out: list[str] = []
    while True:
        if is_ssml(buffer):  # an SSML document is one segment, cut after its end
            end = buffer.find("</speak>")
            cut = end + len("</speak>") if end >= 0 else (len(buffer) if final else -1)
        elif by_line:
            cut = buffer.find("\n") + 1
        else:
            cut = sentence_end(buffer, final)
        if cut <= 0:
            break
        piece, buffer = buffer[:cut], buffer[cut:]
        if piece.strip():
            out.append(" ".join(piece.split()))
    if final and buffer.strip():
        out.append(" ".join(buffer.split()))
        buffer = ""
    return out, buffer



class SentenceStream:
    """Text fed in pieces; each complete sentence (or line, ``by_line``) comes out once, as soon
    as it is complete; :meth:`finish` gives the rest."""

    def __init__(self, by_line: bool = False) -> None:
        self.by_line = by_line
        self.buffer = ""

    def feed(self, text: str) -> list[str]:
        done, self.buffer = segments(self.buffer + text, self.by_line, final=False)
        return done

    def finish(self) -> list[str]:
        done, self.buffer = segments(self.buffer, self.by_line, final=True)
        return done
