"""Sentence captions: SubRip (.srt) and WebVTT (.vtt), one cue per sentence (and per spoken chapter
title), at the sentence's exact place in the final timeline."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from audiocpp.engine.text.srt import format_time


@dataclass(frozen=True)
class TimedCue:
    start: float  # seconds in the output file
    end: float
    text: str


def _lines(text: str, width: int = 60) -> str:
    return "\n".join(textwrap.wrap(text, width=width, break_long_words=False, break_on_hyphens=False)) or text


def to_srt(cues: list[TimedCue]) -> str:
    blocks = [
        f"{i}\n{format_time(c.start)} --> {format_time(c.end)}\n{_lines(c.text)}\n"
        for i, c in enumerate(cues, start=1)
    ]
    return "\n".join(blocks)


def vtt_time(seconds: float) -> str:
    return format_time(seconds).replace(",", ".")


def to_vtt(cues: list[TimedCue]) -> str:
    blocks = [
        f"{i}\n{vtt_time(c.start)} --> {vtt_time(c.end)}\n{_lines(c.text).replace('-->', '->')}\n"
        for i, c in enumerate(cues, start=1)
    ]
    return "WEBVTT\n\n" + "\n".join(blocks)
