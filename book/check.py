"""``audiocpp book --check FILE``: a file's loudness, peaks, noise floor and room tone against ACX's
rules, per chapter (the file's chapter marks; a file without marks is one chapter)."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from audiocpp.engine import fs
from audiocpp.engine.errors import AudiocppError, UsageError

from .loudness import FLOOR_MAX, HEAD_RANGE, PEAK_MAX, RMS_RANGE, TAIL_RANGE, Levels, measure
from .media import decode, probe


@dataclass
class ChapterLevels:
    number: int
    title: str
    start: float
    levels: Levels


def check_file(path: Path) -> list[ChapterLevels]:
    """Every chapter's levels, decoding the file once (a chapter at a time in memory)."""
    from .extra import need_extra

    need_extra()
    if not fs.is_file(path):
        raise UsageError(f"--check {str(path)!r} does not exist", hint="pass the audiobook file to check")
    info = probe(path)
    streams = [s for s in info.get("streams", []) if s.get("codec_type") == "audio"]
    if not streams:
        raise UsageError(f"{str(path)!r} has no audio stream", hint="pass an audio file")
    rate = int(streams[0].get("sample_rate") or 44100)
    marks = [
        (float(c["start_time"]), float(c["end_time"]), (c.get("tags") or {}).get("title", ""))
        for c in info.get("chapters", [])
    ]
    if not marks:
        marks = [(0.0, math.inf, path.stem)]
    bounds = [int(round(start * rate)) for start, _, _ in marks[1:]]
    out: list[ChapterLevels] = []
    pending: list[np.ndarray] = []
    have = 0
    index = 0

    def close(samples: np.ndarray) -> None:
        start, _, title = marks[len(out)]
        out.append(ChapterLevels(len(out) + 1, title, start, measure(samples, rate)))

    for block in decode(path, rate):
        pending.append(block)
        have += block.size
        while index < len(bounds) and have >= bounds[index] - (bounds[index - 1] if index else 0):
            whole = np.concatenate(pending)
            cut = bounds[index] - (bounds[index - 1] if index else 0)
            close(whole[:cut])
            rest = whole[cut:]
            pending, have = [rest], rest.size
            index += 1
    remaining = np.concatenate(pending) if pending else np.zeros(0, np.float32)
    if len(out) < len(marks):
        close(remaining)
    if not any(c.levels.duration_s > 0 for c in out):
        raise UsageError(f"{str(path)!r} holds no audio", hint="pass a file with audio in it")
    return out


def _f(value: float | None, unit: str = "") -> str:
    if value is None or not math.isfinite(value):
        return "-inf" if value is not None else "n/a"
    return f"{value:.1f}{unit}"


def report(path: Path, stream: TextIO | None = None) -> bool:
    """Print the table; True when every chapter meets ACX's rules."""
    stream = stream or sys.stdout
    chapters = check_file(path)
    print(
        f"{path}: {len(chapters)} chapter{'s' if len(chapters) != 1 else ''}; ACX wants RMS "
        f"{RMS_RANGE[0]:g} to {RMS_RANGE[1]:g} dB, peaks <= {PEAK_MAX:g} dB, "
        f"noise floor <= {FLOOR_MAX:g} dB, "
        f"{HEAD_RANGE[0]:g}-{HEAD_RANGE[1]:g} s of room tone at the head and "
        f"{TAIL_RANGE[0]:g}-{TAIL_RANGE[1]:g} s at the tail",
        file=stream,
    )
    print(
        f"{'#':>3}  {'chapter':28} {'length':>8} {'rms_db':>7} {'peak_dbtp':>9} {'floor_db':>8} {'lufs':>6} "
        f"{'head_s':>6} {'tail_s':>6}  acx",
        file=stream,
    )
    failing: list[str] = []
    for c in chapters:
        lv = c.levels
        problems = lv.problems()
        print(
            f"{c.number:>3}  {c.title[:28]:28} {lv.duration_s:>8.1f} {_f(lv.rms_db):>7} {_f(lv.peak_db):>9} "
            f"{_f(lv.floor_db):>8} {_f(lv.lufs):>6} {lv.head_s:>6.2f} {lv.tail_s:>6.2f}  "
            f"{'ok' if not problems else 'FAIL: ' + '; '.join(problems)}",
            file=stream,
        )
        if problems:
            failing.append(f"chapter {c.number}")
    print(f"acx: {'pass' if not failing else 'fail'}", file=stream)
    return not failing


def run_check(path: Path) -> None:
    if not report(path):
        raise AudiocppError(
            f"{str(path)!r} does not meet ACX's rules (see the table above)",
            hint="make it with `audiocpp book ... --master acx` (the default for .m4b)",
        )


__all__: list[Any] = ["check_file", "report", "run_check"]
