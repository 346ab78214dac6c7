"""Kokoro's prompt layout: phoneme tokens -> the id rows one forward takes, and the word timings that
come back from its predicted durations.

A forward takes ``[0, *ids, 0]``: each phoneme character in the model's vocabulary is one id, others
are dropped (upstream's ``KModel.forward``), at most ``context_length - 2`` (510) of them. Text is cut
into such chunks by the text front end (``g2p.chunk_tokens``: at sentence punctuation first, as
upstream's ``KPipeline`` cuts English); a chunk's style row is ``pack[len(phonemes) - 1]``, counted on
the phoneme string before unknown symbols are dropped, as ``KPipeline.infer`` counts.

Word timings follow upstream's ``KPipeline.join_timestamps`` (what Kokoro-FastAPI's captioned speech
returns): durations counted in half frames, so that a space's frames are split between the words around
it, the first word starting ``pred_dur[0] - 3`` frames in. Here a token's phoneme count is the number of
its symbols the vocabulary kept, so a dropped symbol does not shift the later words (upstream counts
characters; the two agree when nothing is dropped).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from audiocpp.engine.records import WordTiming

#: Vocabulary symbols that are punctuation: a chunk of nothing else has no sound to make.
SILENT = frozenset(';:,.!?—…"()“” ')


class TokenLike(Protocol):
    text: str
    phonemes: str
    whitespace: bool


@dataclass
class PhonemeToken:
    """A word of a raw phoneme string (``--phonemes``): its text is its phonemes."""

    text: str
    phonemes: str
    whitespace: bool = True


def phoneme_tokens(phonemes: str) -> list[PhonemeToken]:
    """A phoneme string as words split at spaces (the spaces become ``whitespace``)."""
    words = phonemes.strip().split(" ")
    return [PhonemeToken(w, w, i < len(words) - 1) for i, w in enumerate(words) if w]


def tokens_to_phonemes(tokens: Sequence[TokenLike]) -> str:
    """Upstream's ``tokens_to_ps``: phonemes joined by a space where a token has whitespace after it."""
    return "".join(t.phonemes + (" " if t.whitespace else "") for t in tokens).strip()


@dataclass
class Chunk:
    """One forward's worth of a request: its tokens, phoneme string and ids (without the boundary 0s)."""

    tokens: list[TokenLike]
    phonemes: str
    ids: list[int]
    dropped: str = ""  # symbols outside the vocabulary, in order of appearance
    start_s: float = 0.0  # where its audio starts in the request's audio (set when generated)
    words: list[WordTiming] = field(default_factory=list)

    @property
    def style_index(self) -> int:
        return len(self.phonemes) - 1

    @property
    def speakable(self) -> bool:
        """Whether a symbol of the vocabulary other than spaces and punctuation is left to speak."""
        return any(p not in SILENT and not p.isspace() for p in self.phonemes if p not in self.dropped)


def make_chunk(tokens: Sequence[TokenLike], vocab: dict[str, int]) -> Chunk:
    phonemes = tokens_to_phonemes(tokens)
    ids = [vocab[p] for p in phonemes if p in vocab]
    dropped = "".join(dict.fromkeys(p for p in phonemes if p not in vocab))
    return Chunk(list(tokens), phonemes, ids, dropped)


def word_timings(tokens: Sequence[TokenLike], pred_dur: Sequence[int], vocab: dict[str, int],
                 seconds_per_half_frame: float, offset_s: float = 0.0) -> list[WordTiming]:
    """Start and end of each token with phonemes (punctuation included, as upstream), from the chunk's
    predicted durations ``pred_dur`` (one per id, the boundary ids included)."""
    if not tokens or len(pred_dur) < 3:
        return []
    out: list[WordTiming] = []
    left = right = 2 * max(0, int(pred_dur[0]) - 3)
    i = 1
    end_index = len(pred_dur) - 1
    for t in tokens:
        if i >= end_index:
            break
        count = sum(1 for p in t.phonemes if p in vocab)
        if not count:
            if t.whitespace:
                i += 1
                left = right + int(pred_dur[i])
                right = left + int(pred_dur[i])
                i += 1
            continue
        j = i + count
        if j >= len(pred_dur):
            break
        start = left
        token_dur = int(sum(int(d) for d in pred_dur[i:j]))
        space_dur = int(pred_dur[j]) if t.whitespace else 0
        left = right + 2 * token_dur + space_dur
        out.append(WordTiming(t.text, offset_s + start * seconds_per_half_frame,
                              offset_s + left * seconds_per_half_frame, t.phonemes))
        right = left + space_dur
        i = j + (1 if t.whitespace else 0)
    return out
