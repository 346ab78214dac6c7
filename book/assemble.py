"""A chapter's timeline: its chunks' audio with pauses between sentences and paragraphs, and the
cue of every sentence (start and end in samples, exact: each sentence is its own chunks).

Each chunk is trimmed of the silence at its edges (frames 40 dB under its loudest, kept 30 ms
around the speech) so that the pauses are the ones asked for. Where the family times its words, each
chunk's words are placed on the timeline with its audio (``words.place``) and found in the sentence's
text (``words.align``): a cue's ``words``. ``--master acx``: the chapter starts
with 0.75 s of room tone and ends with ``--pause-chapter`` seconds of it (held to ACX's 1-5 s), and
every pause is room tone; ``--master none``: pauses are silence, the chapter ends with
``--pause-chapter`` seconds of it and starts at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .master import HEAD_S, TAIL_RANGE_S, master
from .plan import ChapterPlan
from .words import SentenceWord, align, place

#: a chunk's words: ``[text, start_s, end_s, ...]`` in its audio, or None (the family times none)
ChunkWords = Callable[[str], "list[list[object]] | None"]


@dataclass
class Pauses:
    sentence: float = 0.35
    paragraph: float = 0.8
    chapter: float = 2.0


@dataclass
class Cue:
    start: int  # samples from the chapter's start
    end: int
    text: str
    words: list[SentenceWord] = field(default_factory=list)  # its words found in text, where timed


@dataclass
class Assembled:
    samples: np.ndarray
    rate: int
    cues: list[Cue] = field(default_factory=list)
    gain_db: float | None = None  # mastering's gain (None: not mastered)
    master_s: float = 0.0  # the time mastering took

    @property
    def duration(self) -> float:
        return self.samples.size / self.rate


def trim_bounds(
    samples: np.ndarray, rate: int, below_peak_db: float = 40.0, margin_s: float = 0.03
) -> tuple[int, int]:
    """Where ``samples`` start and end without the quiet head and tail (frames ``below_peak_db`` under
    the loudest)."""
    frame = max(1, rate // 100)
    n = samples.size // frame
    if n < 3:
        return 0, samples.size
    energy = np.mean(samples[: n * frame].astype(np.float64).reshape(n, frame) ** 2, axis=1)
    peak = float(energy.max())
    if peak <= 1e-12:
        return 0, samples.size
    loud = np.flatnonzero(energy > peak * 10 ** (-below_peak_db / 10))
    margin = int(margin_s * rate)
    start = max(0, loud[0] * frame - margin)
    end = min(samples.size, (loud[-1] + 1) * frame + margin)
    return int(start), int(end)


def trim(samples: np.ndarray, rate: int, below_peak_db: float = 40.0, margin_s: float = 0.03) -> np.ndarray:
    """``samples`` without the quiet head and tail (:func:`trim_bounds`)."""
    start, end = trim_bounds(samples, rate, below_peak_db, margin_s)
    return samples[start:end]


def assemble(
    plan: ChapterPlan,
    audio: Callable[[str], np.ndarray],
    rate: int,
    pauses: Pauses,
    *,
    mastering: str = "none",
    words: ChunkWords | None = None,
) -> Assembled:
    """Chapter ``plan`` from its chunks (``audio(key)``: samples at ``rate``; ``words(key)``: their timed
    words, where the family times them)."""
    acx = mastering == "acx"
    pieces: list[np.ndarray] = []
    gaps: list[np.ndarray] = []
    cues: list[Cue] = []
    position = 0

    def gap(seconds: float) -> None:
        nonlocal position
        n = int(round(seconds * rate))
        if n > 0:
            pieces.append(np.zeros(n, np.float32))
            gaps.append(np.ones(n, bool))
            position += n

    def speech(samples: np.ndarray) -> None:
        nonlocal position
        pieces.append(samples.astype(np.float32, copy=False))
        gaps.append(np.zeros(samples.size, bool))
        position += samples.size

    if acx:
        gap(HEAD_S)
    previous_paragraph: int | None = None
    for sentence in plan.sentences:
        if sentence.pause_before is not None:  # a marker's pause in the text
            gap(sentence.pause_before)
        elif previous_paragraph is not None:
            gap(pauses.sentence if sentence.paragraph == previous_paragraph else pauses.paragraph)
        start = position
        placed = []
        for i, index in enumerate(sentence.units):
            if i:
                gap(min(0.15, pauses.sentence))
            key = plan.units[index].key
            samples = audio(key)
            head, tail = trim_bounds(samples, rate)
            timed = words(key) if words is not None else None
            if timed:
                placed += place(timed, head=head, length=tail - head, position=position, rate=rate)
            speech(samples[head:tail])
        cues.append(Cue(start, position, sentence.text, align(sentence.text, placed)))
        previous_paragraph = sentence.paragraph
    tail = pauses.chapter
    if acx:
        tail = min(max(tail, TAIL_RANGE_S[0]), TAIL_RANGE_S[1])
    gap(tail)
    samples = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
    if not acx:
        return Assembled(samples, rate, cues)
    start = time.perf_counter()
    mastered = master(samples, np.concatenate(gaps), rate, seed=plan.number)
    return Assembled(mastered.samples, rate, cues, mastered.gain_db, time.perf_counter() - start)
