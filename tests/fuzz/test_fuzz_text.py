"""Fuzz text chunking and tokenization with any Unicode: control characters, RTL and bidi marks,
combining marks, emoji with joiners, CJK, surrogates-free code points of every plane, and
one-megabyte strings (repeated units, no spaces, only marks, "字." runs).

Chunkers never raise for text (any ``str``); their chunks keep every non-space character in
order, within the budget. Tokenizers (the engine's two BPE pipelines, rebuilt from GGUF keys
that may lie, and the family front-ends that feed them) encode anything, and a qwen2
byte-level round trip gives the NFC text back.
"""

from __future__ import annotations

import unicodedata
from functools import cache
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from audiocpp.engine.text import add_punctuation, chunk_text, chunk_text_punctuation, split_sentences

from . import seeds
from .harness import check, fuzz_settings

ODD = ("\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u202a", "\u202b", "\u202e", "\u2066", "\u2069",
       "\ufeff", "\u0301", "\u0308", "\u20e3", "\ufe0f", "\U0001f3fb", "\U0001f469", "\U0001f9d1", "\u0627",
       "\u05d0", "\u4e2d", "\u3002", "\uff0c", "\u2026", "\u00a0", "\u3000", "\u2028", "\u2029", "\x00",
       "\x1b", "\x7f", "\r", "\n", "\t", ".", "!", "?", ",", ";", ":", "-", "\u2014", "\"", "'", "(", ")",
       "[", "]", "\u300c", "Mr.", "e.g.", "U.S.A.", " ", "  ", "[laughter]", "<|im_end|>", "<s>",
       "\U0010ffff", "\ufffd")
TEXT = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=200),
    st.lists(st.one_of(st.sampled_from(ODD), st.text(max_size=4)), max_size=60).map("".join),
)


def _kept(text: str, chunks: list[str]) -> None:
    def ink(s: str) -> str:
        return "".join(s.split())

    assert ink("".join(chunks)) == ink(text), "a chunker lost, added or reordered characters"


def chunkers(text: str, budget: int, minimum: int) -> list:
    """Every chunker and front-end text function, each as one call with its checks."""
    from audiocpp.families.audio8_tts.prompt_layout import clean_text, word_budget_chunks
    from audiocpp.families.omnivoice.prompt_layout import (
        combine_text,
        estimate_target_tokens,
        resolve_instruct,
    )

    def general() -> None:
        chunks = chunk_text(text, budget, min_chars=minimum)
        assert all(len(c) <= budget for c in chunks), f"a chunk is longer than {budget}"
        _kept(text, chunks)

    def instruct() -> None:
        try:
            resolve_instruct(text[:40])
        except Exception as error:  # refusing an unknown instruction is the front-end's job
            from audiocpp.engine.errors import AudiocppError

            if not isinstance(error, AudiocppError):
                raise

    return [
        general,
        lambda: _kept(text, chunk_text_punctuation(text, budget, minimum or None)),
        lambda: split_sentences(text),
        lambda: add_punctuation(text),
        lambda: _kept(text.strip(" \t\n\v\f\r"), word_budget_chunks(text, budget)),
        lambda: clean_text(text),
        lambda: combine_text(text, text[:10] or None),
        lambda: estimate_target_tokens(text, text[:5] or None, 25),
        instruct,
    ]


@given(TEXT, st.integers(1, 400), st.integers(0, 100))
@fuzz_settings("text_chunk")
def test_chunking_any_text(text: str, budget: int, minimum: int) -> None:
    for call in chunkers(text, budget, minimum):
        check("text_chunk", call)


BIG = 1_000_000


@given(st.one_of(TEXT.filter(bool),
                 st.sampled_from(["字.", "a", "\u0301", "a.", "👩\u200d", "Mr. ", "\n", " ", "a, ", "字",
                                  "- ", "[laughter]", "\u202e", "\x00"])),
       st.sampled_from([1, 7, 80, 300]))
@fuzz_settings("text_big")
def test_megabyte_texts(unit: str, budget: int) -> None:
    text = (unit * (BIG // len(unit) + 1))[:BIG]
    for call in chunkers(text, budget, budget // 3):
        check("text_big", call, limit_s=20)


# -- tokenizers -----------------------------------------------------------------------------------
@cache
def tokenizer_folders() -> dict[str, Path]:
    from tests.engine.tokenizer_builders import build_llama, build_qwen2

    return {"qwen2": build_qwen2(seeds.seed_dir() / "qwen2"),
            "llama_bpe": build_llama(seeds.seed_dir() / "llama")}


@cache
def gguf_keys(style: str) -> dict:
    from audiocpp.engine.tokenizer import gguf_tokenizer_metadata

    return gguf_tokenizer_metadata(tokenizer_folders()[style], style)


@cache
def rebuilt(style: str):
    from audiocpp.engine.tokenizer import tokenizer_from_gguf

    return tokenizer_from_gguf(gguf_keys(style), style)


def encode_all(text: str) -> None:
    from audiocpp.families.omnivoice.prompt_layout import tokenize_with_nonverbal_tags
    from audiocpp.families.voxcpm2.prompt_layout import VoxCPMTokenizer, normalize_text

    qwen = rebuilt("qwen2")
    ids = qwen.encode(text, add_special_tokens=False).ids
    specials = ("<|", "<think>", "</think>")
    if not any(s in text for s in specials):
        assert qwen.decode(ids, skip_special_tokens=False) == unicodedata.normalize("NFC", text)
    tokenize_with_nonverbal_tags(qwen, text)
    llama = rebuilt("llama_bpe")
    llama.encode(text)
    VoxCPMTokenizer(llama)(normalize_text(text))


@given(TEXT)
@fuzz_settings("tokenizer_text")
def test_tokenizers_take_any_text(text: str) -> None:
    check("tokenizer_text", lambda: encode_all(text))


VALUES = st.one_of(st.none(), st.booleans(), st.integers(-5, 2**40), st.text(max_size=6),
                   st.lists(st.one_of(st.text(max_size=4), st.integers(0, 9),
                                      st.lists(st.text(max_size=3), max_size=3)),
                            max_size=5), st.floats())


@given(st.sampled_from(["qwen2", "llama_bpe"]), st.data())
@fuzz_settings("tokenizer_gguf")
def test_tokenizer_from_lying_gguf_keys(style: str, data: st.DataObject) -> None:
    """GGUF tokenizer keys with one or two replaced by anything a GGUF can hold."""
    import numpy as np

    from audiocpp.engine.tokenizer import tokenizer_from_gguf

    keys = dict(gguf_keys(style))
    for _ in range(data.draw(st.integers(1, 2))):
        key = data.draw(st.sampled_from(sorted(keys) + ["tokenizer.ggml.add_bos_token",
                                                        "tokenizer.ggml.add_eos_token"]))
        kind = data.draw(st.integers(0, 3))
        if kind == 0:
            keys[key] = data.draw(VALUES)
        elif kind == 1:
            keys[key] = np.asarray(data.draw(st.lists(st.integers(-3, 300), max_size=4)), dtype=np.int32)
        elif kind == 2 and isinstance(keys.get(key), list) and keys[key]:
            items = list(keys[key])
            items[data.draw(st.integers(0, len(items) - 1))] = data.draw(VALUES)
            keys[key] = items
        else:
            keys.pop(key, None)
    check("tokenizer_gguf", lambda: tokenizer_from_gguf(keys, style).encode("Hello 你好 😀"))
