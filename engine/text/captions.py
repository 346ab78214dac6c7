"""Captions: SubRip (.srt) and WebVTT (.vtt) from timed cues (a book's sentences, a request's words), and
word timings as cues."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .srt import format_time

if TYPE_CHECKING:
    from ..records import WordTiming


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


def word_cues(words: Sequence[WordTiming]) -> list[TimedCue]:
    """One cue per word (punctuation joins the word before it, as a caption reads)."""
    cues: list[TimedCue] = []
    for w in words:
        text = w.text.strip()
        if not text:
            continue
        if cues and not any(ch.isalnum() for ch in text):
            last = cues[-1]
            cues[-1] = TimedCue(last.start, max(last.end, w.end), last.text + text)
            continue
        cues.append(TimedCue(w.start, max(w.end, w.start), text))
    return cues


def captions_text(words: Sequence[WordTiming], suffix: str) -> str:
    """Word-level captions in the format of ``suffix`` (``.srt`` or ``.vtt``)."""
    cues = word_cues(words)
    return to_vtt(cues) if suffix.lower() == ".vtt" else to_srt(cues)


def timestamps_json(audio_duration: float, sample_rate: int, words: Sequence[WordTiming]) -> str:
    """The word-timings file of ``audiocpp --timestamps`` and ``audiocpp batch``: sample rate, duration and
    each word's start and end in seconds."""
    import json

    body = {"sample_rate": sample_rate, "duration_s": round(audio_duration, 4),
            "words": [w.as_dict() for w in words]}
    return json.dumps(body, ensure_ascii=False, indent=1) + "\n"
