"""SubRip (.srt) subtitles: cues with their times and text, checked cue by cue.

A cue is a block of lines separated from the next by a blank line: its number, a timing line
``HH:MM:SS,mmm --> HH:MM:SS,mmm`` (a ``.`` is accepted for the ``,``; anything after the end
time, such as position coordinates, is ignored) and one or more lines of text. Formatting tags
(``<i>``, ``<font ...>``, ``{\\an8}``) are dropped and the lines joined with spaces.

Every problem is found, then all are reported at once in one :class:`UsageError`, each by its
cue number and line: a missing or non-numeric number, a malformed timestamp, an end not after
its start, a cue that starts before the previous one ends (overlap or wrong order), a cue
without text, a file without cues.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .. import fs
from ..errors import UsageError

_TIME = r"(\d{1,3}):(\d{2}):(\d{2})[,.](\d{1,3})"
_TIMING = re.compile(rf"^\s*{_TIME}\s*-->\s*{_TIME}(?:\s+.*)?$")
_NUMBER = re.compile(r"[0-9]{1,9}")  # ASCII digits: "²".isdigit() is true but int("²") fails
_TAGS = re.compile(r"<[^>]*>|\{\\[^}]*\}")
_HINT = ("each cue is a number, 'HH:MM:SS,mmm --> HH:MM:SS,mmm' and its text, cues in time order "
         "without overlap")


@dataclass(frozen=True)
class Cue:
    number: int
    start: float  # seconds
    end: float
    text: str
    line: int  # 1-based line of the cue number in the file

    @property
    def duration(self) -> float:
        return self.end - self.start


def format_time(seconds: float) -> str:
    """``HH:MM:SS,mmm`` as SRT writes it."""
    ms = round(seconds * 1000)
    return f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"


def _seconds(h: str, m: str, s: str, frac: str) -> float | None:
    if int(m) >= 60 or int(s) >= 60:
        return None
    return int(h) * 3600 + int(m) * 60 + int(s) + int(frac.ljust(3, "0")) / 1000.0


def parse_srt(text: str, name: str = "the SRT file") -> list[Cue]:
    """The cues of SRT ``text``; one UsageError listing every problem, by cue number."""
    lines = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    blocks: list[tuple[int, list[str]]] = []
    current: list[str] = []
    start_line = 0
    for i, line in enumerate(lines, start=1):
        if line.strip():
            if not current:
                start_line = i
            current.append(line.strip())
        elif current:
            blocks.append((start_line, current))
            current = []
    if current:
        blocks.append((start_line, current))

    problems: list[str] = []
    cues: list[Cue] = []
    for position, (line_no, block) in enumerate(blocks, start=1):
        number_line, rest = block[0], block[1:]
        if not _NUMBER.fullmatch(number_line):
            if _TIMING.match(number_line):  # a cue without its number
                problems.append(f"cue {position} (line {line_no}): the cue number is missing before its "
                                "timing line")
            else:
                problems.append(f"cue {position} (line {line_no}): expected a cue number, "
                                f"got {number_line[:40]!r}")
            continue
        number = int(number_line)
        where = f"cue {number} (line {line_no + 1})"
        if not rest:
            problems.append(f"{where}: no timing line after the cue number")
            continue
        match = _TIMING.match(rest[0])
        if match is None:
            problems.append(f"{where}: bad timing line {rest[0][:60]!r}; "
                            "expected 'HH:MM:SS,mmm --> HH:MM:SS,mmm'")
            continue
        start, end = _seconds(*match.groups()[:4]), _seconds(*match.groups()[4:])
        if start is None or end is None:
            problems.append(f"{where}: minutes and seconds must be below 60 in {rest[0]!r}")
            continue
        if end <= start:
            problems.append(f"{where}: ends at {format_time(end)}, not after its start {format_time(start)}")
            continue
        words = " ".join(_TAGS.sub("", t).strip() for t in rest[1:])
        words = re.sub(r"\s+", " ", words).strip()
        if not words:
            problems.append(f"cue {number} (line {line_no}): has no text to speak")
            continue
        if cues and start < cues[-1].end:
            before = cues[-1]
            what = f"before cue {before.number} ends at {format_time(before.end)}"
            if start < before.start:
                what = (f"before cue {before.number} (which starts at {format_time(before.start)}); "
                        "cues must be in time order")
            problems.append(f"{where}: starts at {format_time(start)}, {what}")
            continue
        cues.append(Cue(number, start, end, words, line_no))
    if not problems and not cues:
        problems.append("no cues found")
    if problems:
        listing = "\n  ".join(problems)
        count = f"{len(problems)} problem{'s' if len(problems) > 1 else ''}"
        raise UsageError(f"{name} has {count}:\n  {listing}", hint=_HINT)
    return cues


def read_srt(path: str | Path) -> list[Cue]:
    """The cues of the SRT file ``path`` (UTF-8, with or without BOM)."""
    path = Path(path)
    flag = f"--srt {str(path)!r}"
    if not fs.exists(path):
        raise UsageError(f"{flag} does not exist", hint="check the path")
    if fs.is_dir(path):
        raise UsageError(f"{flag} is a folder", hint="pass a .srt file")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise UsageError(f"{flag} is not UTF-8 text",
                         hint="convert it, e.g. `iconv -f LATIN1 -t UTF-8 FILE`") from None
    except OSError as error:
        raise UsageError(f"cannot read {flag}: {error.strerror or error}",
                         hint="check its permissions") from None
    return parse_srt(text, name=flag)
