"""The Audio8 TTS prompt, as upstream ``processing_arktts.py`` builds it, through the engine tokenizer.

Each text segment is tokenized on its own (no special tokens added) and the ids concatenated.
Row 0 of the prompt holds those ids; the reference frames sit in between, row 0 holding
``semantic_begin_id + code0`` and rows 1..10 the ten codes (zero elsewhere).

- TTS: ``<|im_start|>system\\n`` | ``convert the provided text to speech`` | ``<|im_end|>\\n`` |
  ``<|im_start|>user\\n`` | text | ``<|im_end|>\\n`` | ``<|im_start|>assistant\\n<|voice|>``.
- Cloning: ``<|im_start|>system\\n`` | ``convert the provided text to speech reference to the
  following:\\n\\nText:\\n`` | ``<|speaker:0|>`` + transcript | ``\\n\\nSpeech:\\n`` | reference frames |
  ``<|im_end|>\\n`` | ``<|im_start|>user\\n`` | text | ``<|im_end|>\\n`` |
  ``<|im_start|>assistant\\n<|voice|>``.
- Several references (``multi_reference_cond``, audio.cpp's layout): transcripts joined by
  ``\\n``, the i-th prefixed ``<|speaker:i|>``, then every reference's frames in order.
- Long text (audio.cpp's layout): from the second chunk on, the previous chunk is a finished
  turn before the current one: ``<|im_start|>user\\n`` | its text | ``<|im_end|>\\n`` |
  ``<|im_start|>assistant\\n<|voice|>`` | its frames | ``<|im_end|>\\n``.

A transcript that already holds a ``<|speaker:N|>`` tag is kept as it is. Text is cleaned as
upstream cleans it: whitespace runs become one space, ends stripped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
from tokenizers import Tokenizer

from audiocpp.engine.errors import UsageError

from .config import Audio8Config

_SPEAKER = re.compile(r"<\|speaker:\d+\|>")
SYSTEM = "<|im_start|>system\n"
TTS_INSTRUCTION = "convert the provided text to speech"
CLONE_INSTRUCTION = "convert the provided text to speech reference to the following:\n\nText:\n"
SPEECH = "\n\nSpeech:\n"
END = "<|im_end|>\n"
USER = "<|im_start|>user\n"
ASSISTANT = "<|im_start|>assistant\n<|voice|>"


def clean_text(text: str) -> str:
    """Upstream's ``_clean_text``: ``" ".join(text.strip().split())``."""
    return " ".join(str(text).strip().split())


def format_reference_text(text: str, speaker: int = 0) -> str:
    cleaned = clean_text(text)
    return cleaned if _SPEAKER.search(cleaned) else f"<|speaker:{speaker}|>{cleaned}"


@dataclass(frozen=True)
class Reference:
    """A reference voice: its transcript and codec codes ``[num_codebooks, T]``."""

    text: str
    codes: torch.Tensor


@dataclass(frozen=True)
class Turn:
    """A finished turn (long-form text): the previous chunk's text and generated codes."""

    text: str
    codes: torch.Tensor


class PromptLayoutBuilder:
    def __init__(self, tokenizer: Tokenizer, cfg: Audio8Config) -> None:
        self.tokenizer, self.cfg = tokenizer, cfg

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def _text(self, parts: list[str]) -> list[int]:
        return [i for part in parts for i in self.encode(part)]

    def build(self, text: str, references: list[Reference] | tuple[Reference, ...] = (),
              previous: Turn | None = None) -> torch.Tensor:
        """The prompt ``[1 + num_codebooks, T]`` (long)."""
        target = clean_text(text)
        if not target:
            raise UsageError("the text to synthesize is empty after whitespace clean-up")
        spans: list[tuple[int, torch.Tensor]] = []
        row0: list[int] = []

        def add_codes(codes: torch.Tensor) -> None:
            codes = self._check_codes(codes)
            spans.append((len(row0), codes))
            row0.extend((codes[0] + self.cfg.semantic_begin_id).tolist())

        if references:
            parts = [SYSTEM, CLONE_INSTRUCTION]
            for i, ref in enumerate(references):
                if not clean_text(ref.text):
                    raise UsageError("the reference transcript is empty",
                                     hint="pass --reference-text with the exact words spoken in --voice-ref")
                parts += (["\n"] if i else []) + [format_reference_text(ref.text, i)]
            row0 += self._text(parts + [SPEECH])
            for ref in references:
                add_codes(ref.codes)
            row0 += self.encode(END)
        else:
            row0 += self._text([SYSTEM, TTS_INSTRUCTION, END])
        if previous is not None:
            row0 += self._text([USER, clean_text(previous.text), END, ASSISTANT])
            add_codes(previous.codes)
            row0 += self.encode(END)
        row0 += self._text([USER, target, END, ASSISTANT])
        prompt = torch.zeros((self.cfg.num_codebooks + 1, len(row0)), dtype=torch.long)
        prompt[0] = torch.tensor(row0, dtype=torch.long)
        for start, codes in spans:
            prompt[1:, start:start + codes.shape[1]] = codes
        return prompt

    def _check_codes(self, codes: torch.Tensor) -> torch.Tensor:
        codes = torch.as_tensor(codes, dtype=torch.long)
        k = self.cfg.num_codebooks
        if codes.ndim != 2 or codes.shape[0] != k or codes.shape[1] == 0:
            raise UsageError(f"reference codes must have shape [{k}, T>0], got {tuple(codes.shape)}")
        if int(codes.min()) < 0 or int(codes.max()) >= self.cfg.codebook_size:
            raise UsageError(f"reference codes must be in [0, {self.cfg.codebook_size - 1}]")
        return codes


# -- long text: audio.cpp's word-budget chunks ------------------------------------------------------
_SENTENCE_BREAKS = frozenset(".!?。！？")
_CLAUSE_BREAKS = frozenset(",;:，、；：")
_ASCII_SPACE = frozenset(" \t\n\v\f\r")


def _is_cjk_delimiter(ch: str) -> bool:
    return ord(ch) >= 0x80 and (ch in _SENTENCE_BREAKS or ch in _CLAUSE_BREAKS)


def word_budget_chunks(text: str, budget: int) -> list[str]:
    """audio.cpp's default (``word_budget``) text chunker: words are runs between ASCII spaces
    (a full-width CJK sentence or clause mark is a word of its own); a chunk takes as many
    words as fit in ``budget`` code points (counted from its first word to the end of its
    last, spaces included; a single longer word stands alone), then backs off to the last
    word ending a sentence (``.!?。！？``), else a clause (``,;:，、；：``), if one lies past its
    first word. Chunks are stripped of ASCII whitespace; text within the budget is one chunk."""
    if budget <= 0:
        raise ValueError("text chunk budget must be positive")
    trimmed = text.strip(" \t\n\v\f\r")
    if not trimmed:
        return []
    if len(trimmed) <= budget:
        return [trimmed]
    words: list[tuple[int, int]] = []  # code point [start, end) of each word
    pos, n = 0, len(trimmed)
    while pos < n:
        while pos < n and trimmed[pos] in _ASCII_SPACE:
            pos += 1
        if pos >= n:
            break
        if _is_cjk_delimiter(trimmed[pos]):
            words.append((pos, pos + 1))
            pos += 1
            continue
        end = pos + 1
        while end < n and trimmed[end] not in _ASCII_SPACE and not _is_cjk_delimiter(trimmed[end]):
            end += 1
        words.append((pos, end))
        pos = end
    chunks: list[str] = []
    start = 0
    while start < len(words):
        hard_end = start
        while hard_end < len(words) and words[hard_end][1] - words[start][0] <= budget:
            hard_end += 1
        if hard_end == start:
            hard_end = start + 1
        chunk_end = hard_end
        if start + 1 < hard_end < len(words):
            for marks in (_SENTENCE_BREAKS, _CLAUSE_BREAKS):
                found = next((i for i in range(hard_end, start + 1, -1)
                              if trimmed[words[i - 1][1] - 1] in marks), None)
                if found is not None:
                    chunk_end = found
                    break
        chunk = trimmed[words[start][0]:words[chunk_end - 1][1]].strip(" \t\n\v\f\r")
        if chunk:
            chunks.append(chunk)
        start = chunk_end
    return chunks
