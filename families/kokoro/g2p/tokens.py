"""The front end's records and what is done with them after G2P: joining, chunking, vocab filtering.

A :class:`Token` is one word or punctuation mark of the user's text with its phonemes, as misaki's
``MToken``: ``whitespace`` says whether a space follows it in the phoneme string. ``start``/``end``
are character offsets into the text given to :func:`phonemize`, so ``text == source[start:end]``
(``"$3.50"`` keeps that text while its phonemes say "three dollars fifty cents").

:func:`chunk_tokens` cuts a token list into forwards of at most 510 phonemes the way hexgrad's
``KPipeline.en_tokenize`` does: when the next token would overflow, cut after the last sentence
punctuation (``!.?…``), else after the last ``:;``, else after the last ``,—`` (a closing ``)`` or
``”`` right after the mark stays with it), else before the overflowing token. A word is never split;
a single token longer than the limit is cut with a warning. One difference: after a cut upstream
counts the remainder without the space after its last token, one symbol short, so its chunks can reach
511 symbols (which it then truncates); here the count is exact and every chunk fits. With that
corrected, the cuts are upstream's (checked on thousands of random token lists).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from audiocpp.engine.errors import AudiocppWarning

#: Upstream's ``KPipeline`` limit: ALBERT's 512 positions less the two boundary ids.
MAX_PHONEMES = 510
#: ``KPipeline.waterfall_last``: where to cut, best first.
WATERFALL: tuple[str, ...] = ("!.?…", ":;", ",—")
#: Closing marks that stay with the punctuation before them when a chunk is cut there.
BUMPS = frozenset(")”")
#: The punctuation symbols of Kokoro's v1.0 vocabulary (each one token of the model).
PUNCTUATION = frozenset(';:,.!?—…"()“”')


@dataclass
class Token:
    """One word or punctuation mark: its text, its phonemes, and whether a space follows them."""

    text: str
    phonemes: str
    whitespace: bool
    start: int = 0  # character offsets of ``text`` in the phonemized input
    end: int = 0

    @property
    def is_punctuation(self) -> bool:
        return bool(self.phonemes) and all(c in PUNCTUATION for c in self.phonemes)


@dataclass
class G2PResult:
    """What :func:`phonemize` made of a text: the language used, whether it was guessed and why."""

    language: str
    guessed: bool
    reason: str
    tokens: list[Token] = field(default_factory=list)

    @property
    def phonemes(self) -> str:
        return phonemes_of(self.tokens)


def phonemes_of(tokens: Iterable[Token]) -> str:
    """The phoneme string of ``tokens`` (upstream's ``tokens_to_ps``): a space after each token with
    ``whitespace``, the whole stripped."""
    return "".join(t.phonemes + (" " if t.whitespace else "") for t in tokens).strip()


def _spaced(tokens: Sequence[Token]) -> str:
    """The phoneme string of ``tokens`` with the space after the last one (what the next token
    continues)."""
    return "".join(t.phonemes + (" " if t.whitespace else "") for t in tokens).lstrip()


def _cut_point(tokens: Sequence[Token], next_count: int, limit: int) -> int:
    """``KPipeline.waterfall_last``: how many of ``tokens`` go into the chunk being closed."""
    for marks in WATERFALL:
        z = next((i for i in range(len(tokens) - 1, -1, -1) if tokens[i].phonemes and
                  all(c in marks for c in tokens[i].phonemes)), None)
        if z is None:
            continue
        z += 1
        if z < len(tokens) and tokens[z].phonemes and tokens[z].phonemes in BUMPS:
            z += 1
        if next_count - len(phonemes_of(tokens[:z])) <= limit:
            return z
    return len(tokens)


def _split_long(token: Token, limit: int) -> list[Token]:
    """A single token with more than ``limit`` phonemes, cut at spaces where it can be (a warning)."""
    warnings.warn(f"{token.text[:40]!r} alone has {len(token.phonemes)} phonemes, more than the {limit} "
                  "Kokoro takes in one forward; it is cut", AudiocppWarning, stacklevel=3)
    pieces: list[Token] = []
    rest = token.phonemes
    while len(rest) > limit:
        cut = rest.rfind(" ", 0, limit + 1)
        cut = cut if cut > 0 else limit
        pieces.append(Token(token.text, rest[:cut].strip(), True, token.start, token.end))
        rest = rest[cut:].strip()
    pieces.append(Token(token.text, rest, token.whitespace, token.start, token.end))
    return pieces


def chunk_tokens(tokens: Sequence[Token], max_phonemes: int = MAX_PHONEMES) -> list[list[Token]]:
    """``tokens`` cut into chunks whose phoneme strings have at most ``max_phonemes`` symbols,
    preferring sentence punctuation, then ``:;``, then ``,—`` (upstream's waterfall)."""
    if max_phonemes < 1:
        raise ValueError("max_phonemes must be positive")
    flat: list[Token] = []
    for t in tokens:
        flat.extend(_split_long(t, max_phonemes) if len(t.phonemes) > max_phonemes else [t])
    chunks: list[list[Token]] = []
    current: list[Token] = []
    for t in flat:
        count = len(_spaced(current))
        if current and count + len(t.phonemes) > max_phonemes:
            z = _cut_point(current, count + len(t.phonemes), max_phonemes)
            chunks.append(current[:z])
            current = current[z:]
        current.append(t)
    if current:
        chunks.append(current)
    return [c for c in chunks if phonemes_of(c)]


def filter_vocab(phonemes: str, vocab: Mapping[str, int] | Iterable[str]) -> tuple[str, str]:
    """``phonemes`` without the symbols ``vocab`` lacks (as upstream's ``KModel.forward`` drops
    them), and those dropped symbols, each once, in order of appearance."""
    known = vocab if isinstance(vocab, Mapping) else frozenset(vocab)
    kept = "".join(c for c in phonemes if c in known)
    dropped = "".join(dict.fromkeys(c for c in phonemes if c not in known))
    return kept, dropped


def dropped_message(dropped: str, text: str) -> str:
    """Says which phoneme symbols were dropped, and from which text."""
    shown = text if len(text) <= 60 else text[:57] + "..."
    symbols = " ".join(f"{c!r} (U+{ord(c):04X})" for c in dropped)
    return (f"{len(dropped)} phoneme symbol(s) not in Kokoro's vocabulary were dropped from {shown!r}: "
            f"{symbols}")


def warn_dropped(dropped: str, text: str, stacklevel: int = 2) -> None:
    """Warns (AudiocppWarning) that ``dropped`` symbols were lost from ``text``; nothing if none."""
    if dropped:
        warnings.warn(dropped_message(dropped, text), AudiocppWarning, stacklevel=stacklevel + 1)


def filter_tokens(tokens: Sequence[Token], vocab: Mapping[str, int] | Iterable[str],
                  warn: bool = True) -> tuple[list[Token], str]:
    """Tokens with their out-of-vocab symbols removed, and the dropped symbols; warns per token
    text where ``warn``."""
    known = vocab if isinstance(vocab, Mapping) else frozenset(vocab)
    out: list[Token] = []
    all_dropped: dict[str, None] = {}
    for t in tokens:
        kept, dropped = filter_vocab(t.phonemes, known)
        if dropped:
            all_dropped.update(dict.fromkeys(dropped))
            if warn:
                warn_dropped(dropped, t.text, stacklevel=2)
        out.append(Token(t.text, kept, t.whitespace, t.start, t.end))
    return out, "".join(all_dropped)
