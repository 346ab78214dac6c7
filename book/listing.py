"""``audiocpp book --list``: the chapters, their lengths and estimated durations; nothing is synthesized."""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any

from .job import Book
from .plan import CHARS_PER_SECOND, parse_selection
from .settings import BookSettings
from .workdir import STATE


def list_chapters(book: Book, settings: BookSettings, stream: Any = None) -> None:
    """``--list``: every chapter with its length and the estimated audio duration (and synthesis time,
    from the speed an earlier run of the same model measured in the work folder)."""
    stream = stream or sys.stdout
    plans = book.plans(settings)
    chosen = set(parse_selection(settings.chapters, len(plans)))
    text = book.text
    speed = None
    with contextlib.suppress(Exception):
        state = (
            json.loads((settings.default_work_dir() / STATE).read_text(encoding="utf-8"))
            if settings.out is not None or settings.out_dir is not None or settings.work_dir is not None
            else {}
        )
        speed = state.get("speed", {}).get(f"{settings.family or ''}|{settings.model or ''}")
    print(
        f"{text.title}"
        + (f" by {text.author}" if text.author else "")
        + f" ({text.kind}, {len(plans)} chapters, {text.chars:,} characters)",
        file=stream,
    )
    print(
        f"{'#':>4}  {'chapter':40} {'chars':>8} {'words':>7} {'chunks':>6} {'audio':>9} {'synthesis':>9}",
        file=stream,
    )
    totals = [0, 0, 0, 0.0, 0.0]
    for number, (chapter, plan) in enumerate(zip(text.chapters, plans), start=1):
        pauses = (
            len(plan.sentences) * settings.pause_sentence
            + len(chapter.blocks) * settings.pause_paragraph
            + settings.pause_chapter
        )
        audio = plan.chars / CHARS_PER_SECOND + pauses
        synth = plan.chars * speed["s_per_char"] if speed else None
        mark = " " if number in chosen else "-"
        title = (chapter.title or text.title)[:40]
        print(
            f"{mark}{number:>3}  {title:40} {chapter.chars:>8,} {chapter.words:>7,} {len(plan.units):>6} "
            f"{_clock(audio):>9} {_clock(synth) if synth is not None else '?':>9}",
            file=stream,
        )
        if number in chosen:
            totals[0] += chapter.chars
            totals[1] += chapter.words
            totals[2] += len(plan.units)
            totals[3] += audio
            totals[4] += synth or 0.0
    print(
        f"{'':>4}  {'total (chosen chapters)':40} {totals[0]:>8,} {totals[1]:>7,} {totals[2]:>6} "
        f"{_clock(totals[3]):>9} {_clock(totals[4]) if speed else '?':>9}",
        file=stream,
    )
    note = (
        "synthesis: at the speed measured by an earlier run of this model in the work folder"
        if speed
        else "synthesis time: '?' until a run of this model measures its speed (kept in the work "
        "folder; pass the same --model and --out)"
    )
    print(f"audio estimated at {CHARS_PER_SECOND:g} characters a second plus the pauses; {note}", file=stream)


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
