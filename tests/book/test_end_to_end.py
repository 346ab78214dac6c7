"""`audiocpp book` end to end, as a subprocess, on the tiny model of every family: the m4b (chapters,
tags, cover, AAC), per-chapter files and the playlist, captions on the sentence timeline, the read-along
EPUB, ACX mastering passing `--check`, one narrator."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from audiocpp.engine.text.srt import parse_srt

from . import inputs
from .conftest import FAMILY_FLAGS, ffprobe, leftovers, needs_ffmpeg, ok, run_book
from .readalong import check_read_along

pytestmark = needs_ffmpeg
SENTENCES = sum(1 + len([s for p in ps for s in p.split(". ")]) for _, ps in inputs.CHAPTERS)  # + each title


def _chapter_meta(work: Path) -> dict[str, dict]:
    """The work folder's assembled chapters by title: their sentence timelines and lengths."""
    out = {}
    for meta_path in (work / "chapters").glob("*.json"):
        meta = json.loads(meta_path.read_text())
        audio = next(p for p in (meta_path.with_suffix(".flac"), meta_path.with_suffix(".wav")) if p.exists())
        info = sf.info(audio)
        out[meta["title"]] = {**meta, "samples": info.frames, "rate": info.samplerate}
    return out


# -- OmniVoice: an EPUB 3 to an .m4b, ACX-mastered, with captions and the read-along book ----------------
@pytest.fixture(scope="module")
def omnivoice_book(tiny_models, books, tmp_path_factory) -> tuple[dict[str, str], Path]:
    out = tmp_path_factory.mktemp("book-omnivoice")
    proc = run_book(
        books["epub3"],
        "--model",
        tiny_models["omnivoice"],
        "--out",
        out / "tides.m4b",
        "--read-along",
        out / "tides-read-along.epub",
        "--narrator",
        "Nia Reed",
        "--seed",
        "5",
        *FAMILY_FLAGS["omnivoice"],
    )
    return ok(proc), out


def test_m4b_chapters_tags_cover_and_aac(omnivoice_book, books) -> None:
    from mutagen.mp4 import MP4

    summary, out = omnivoice_book
    m4b = out / "tides.m4b"
    info = ffprobe(m4b)
    audio = [s for s in info["streams"] if s["codec_type"] == "audio"]
    assert len(audio) == 1 and audio[0]["codec_name"] == "aac" and int(audio[0]["sample_rate"]) == 24000
    assert int(summary["rate"]) == 24000
    # three chapter marks, each within 50 ms of where its assembled chapter starts
    lengths = [float(x) for x in summary["chapter_s"].split(",")]
    starts = np.concatenate(([0.0], np.cumsum(lengths)[:-1]))
    marks = [(float(c["start_time"]), c["tags"]["title"]) for c in info["chapters"]]
    assert [t for _, t in marks] == [t for t, _ in inputs.CHAPTERS]
    assert np.abs(np.array([s for s, _ in marks]) - starts).max() < 0.05
    chapters = _chapter_meta(out / "tides.work")
    assert [chapters[t]["samples"] / chapters[t]["rate"] for t, _ in inputs.CHAPTERS] == pytest.approx(
        lengths, abs=1e-3
    )
    assert abs(float(info["format"]["duration"]) - sum(lengths)) < 0.1
    tags = MP4(m4b).tags
    assert tags["\xa9nam"] == [inputs.TITLE] and tags["\xa9ART"] == [inputs.AUTHOR]
    assert tags["\xa9alb"] == [inputs.TITLE] and tags["\xa9wrt"] == ["Nia Reed"]  # the narrator: composer
    import zipfile

    with zipfile.ZipFile(books["epub3"]) as archive:
        assert bytes(tags["covr"][0]) == archive.read("EPUB/cover.jpg")
    assert [c.title for c in MP4(m4b).chapters] == [t for t, _ in inputs.CHAPTERS]
    assert leftovers(out) == []


def test_captions_are_the_sentence_timeline(omnivoice_book) -> None:
    summary, out = omnivoice_book
    cues = parse_srt((out / "tides.srt").read_text(encoding="utf-8"))
    chapters = _chapter_meta(out / "tides.work")
    expected, offset = [], 0.0
    for title, _ in inputs.CHAPTERS:
        meta = chapters[title]
        expected += [
            (offset + start / meta["rate"], offset + end / meta["rate"], text)
            for text, _, start, end in meta["sentences"]
        ]
        offset += meta["samples"] / meta["rate"]
    assert len(cues) == len(expected) == SENTENCES
    for cue, (start, end, text) in zip(cues, expected):
        assert abs(cue.start - start) <= 0.0015 and abs(cue.end - end) <= 0.0015 and cue.text == text
    assert [c.text for c in cues][:3] == [
        "The Harbour",
        "The ship came in at dawn.",
        "Gulls cried over the water.",
    ]
    vtt = (out / "tides.vtt").read_text(encoding="utf-8")
    assert vtt.startswith("WEBVTT\n")
    times = [line for line in vtt.splitlines() if "-->" in line]
    assert len(times) == len(cues)
    for line, cue in zip(times, cues):
        start, end = (
            sum(float(x) * f for x, f in zip(t.split(":"), (3600, 60, 1))) for t in line.split(" --> ")
        )
        assert abs(start - cue.start) < 0.0015 and abs(end - cue.end) < 0.0015


def test_read_along_epub_is_structurally_valid(omnivoice_book, tmp_path) -> None:
    summary, out = omnivoice_book
    found = check_read_along(out / "tides-read-along.epub", tmp_path)
    assert len(found["chapters"]) == 3 and found["clips"] == SENTENCES
    chapters = _chapter_meta(out / "tides.work")
    for (title, _), chapter in zip(inputs.CHAPTERS, found["chapters"]):
        meta = chapters[title]
        clips = [(b, e) for _, b, e in chapter["spans"]]
        exact = [(s / meta["rate"], e / meta["rate"]) for _, _, s, e in meta["sentences"]]
        assert np.abs(np.array(clips) - np.array(exact)).max() < 0.001
    from ebooklib import epub  # a second reader opens it too

    assert epub.read_epub(str(out / "tides-read-along.epub")).title == inputs.TITLE


def test_acx_master_passes_check(omnivoice_book) -> None:
    _, out = omnivoice_book
    proc = run_book("--check", out / "tides.m4b")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count(" ok") == 3 and "acx: pass" in proc.stdout


def test_one_narrator_from_the_first_chunk(omnivoice_book) -> None:
    summary, out = omnivoice_book
    assert summary["voice"].startswith("the first chunk's voice")
    voices = list((out / "tides.work" / "voice").glob("*.wav"))
    assert len(voices) == 1  # one narrator, kept for later runs
    state = json.loads((out / "tides.work" / "book.json").read_text())
    narrator = next(iter(state["narrators"].values()))
    assert narrator == "Nobody on the quay said a word about the storm."  # the first sentence of 40-200 chars
    reference, rate = sf.read(voices[0])
    assert rate == 24000 and reference.size > 0


# -- VoxCPM2: an EPUB 2 (NCX) to one MP3 per chapter and a playlist ---------------------------------------
def test_voxcpm2_epub2_to_mp3_tracks_and_playlist(tiny_models, books, tmp_path) -> None:
    from mutagen.id3 import ID3
    from mutagen.mp3 import MP3

    folder = tmp_path / "tracks"
    summary = ok(
        run_book(
            books["epub2"],
            "--model",
            tiny_models["voxcpm2"],
            "--out-dir",
            folder,
            "--format",
            "mp3",
            "--seed",
            "3",
            "--narrator",
            "Nia Reed",
            *FAMILY_FLAGS["voxcpm2"],
        )
    )
    names = [f"{i:02d} - {t}" for i, (t, _) in enumerate(inputs.CHAPTERS, start=1)]
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [f"{n}{ext}" for n in names for ext in (".mp3", ".srt", ".vtt")] + [f"{inputs.TITLE}.m3u"]
    )
    lengths = [float(x) for x in summary["chapter_s"].split(",")]
    for number, (name, length) in enumerate(zip(names, lengths), start=1):
        mp3 = MP3(folder / f"{name}.mp3")
        # ACX-mastered by default: 44.1 kHz (mutagen computes 191999 b/s from the 44.1 kHz frames' padding)
        assert mp3.info.sample_rate == 44100 and round(mp3.info.bitrate / 1000) == 192
        assert abs(mp3.info.length - length) < 0.1
        tags = ID3(folder / f"{name}.mp3")
        assert str(tags["TIT2"]) == inputs.CHAPTERS[number - 1][0] and str(tags["TALB"]) == inputs.TITLE
        assert str(tags["TPE1"]) == inputs.AUTHOR and str(tags["TCOM"]) == "Nia Reed"
        assert str(tags["TRCK"]) == f"{number}/3"
        assert tags.getall("APIC")[0].data.startswith(b"\xff\xd8")  # the EPUB 2's <meta name="cover">
        cues = parse_srt((folder / f"{name}.srt").read_text(encoding="utf-8"))
        assert cues[0].text == inputs.CHAPTERS[number - 1][0] and cues[-1].end <= length
    playlist = (folder / f"{inputs.TITLE}.m3u").read_text(encoding="utf-8").splitlines()
    assert playlist[0] == "#EXTM3U" and [line for line in playlist if line.endswith(".mp3")] == [
        f"{n}.mp3" for n in names
    ]
    assert leftovers(folder) == [] and summary["voice"].startswith("the first chunk's voice")


# -- VoxCPM1: a text file, cloning a reference voice, to FLAC files ---------------------------------------
def test_voxcpm1_text_with_a_reference_voice_to_flac(tiny_models, books, tmp_path) -> None:
    from tests.support import voice_like_signal

    reference = tmp_path / "narrator.wav"
    sf.write(reference, voice_like_signal(3, 8000, 16000), 16000)
    folder = tmp_path / "flac"
    summary = ok(
        run_book(
            books["text"],
            "--model",
            tiny_models["voxcpm1"],
            "--out-dir",
            folder,
            "--format",
            "flac",
            "--voice-ref",
            reference,
            "--reference-text",
            "A calm voice.",
            "--chapters",
            "2-3",
            "--no-captions",
            "--seed",
            "2",
            *FAMILY_FLAGS["voxcpm1"],
        )
    )
    assert summary["voice"] == "every chunk clones --voice-ref" and summary["chapters"] == "2"
    files = sorted(folder.glob("*.flac"))
    assert [p.name for p in files] == ["01 - Chapter 2 The Lighthouse.flac", "02 - The Return.flac"]
    assert not list(folder.glob("*.srt"))
    for path, length in zip(files, (float(x) for x in summary["chapter_s"].split(","))):
        info = ffprobe(path)
        assert info["streams"][0]["codec_name"] == "flac" and int(info["streams"][0]["sample_rate"]) == 16000
        assert abs(float(info["format"]["duration"]) - length) < 0.01
    assert not list((tmp_path / "flac.work" / "voice").glob("*.wav"))  # no narrator drawn: the reference is


# -- Audio8: Markdown to an .m4b at 44.1 kHz with the model's own levels ------------------------------------
def test_audio8_markdown_to_m4b_without_mastering(tiny_models, books, tmp_path) -> None:
    from mutagen.mp4 import MP4

    m4b = tmp_path / "tides.m4b"
    summary = ok(
        run_book(
            books["markdown"],
            "--model",
            tiny_models["audio8_tts"],
            "--out",
            m4b,
            "--master",
            "none",
            "--pause-chapter",
            "1.5",
            "--seed",
            "4",
            *FAMILY_FLAGS["audio8_tts"],
        )
    )
    info = ffprobe(m4b)
    assert int(info["streams"][0]["sample_rate"]) == 44100 and info["streams"][0]["codec_name"] == "aac"
    lengths = [float(x) for x in summary["chapter_s"].split(",")]
    starts = np.concatenate(([0.0], np.cumsum(lengths)[:-1]))
    assert np.abs(np.array([float(c["start_time"]) for c in info["chapters"]]) - starts).max() < 0.05
    assert MP4(m4b).tags["\xa9nam"] == [inputs.TITLE] and "covr" not in MP4(m4b).tags  # Markdown: no cover
    # no mastering: no room tone; each chapter ends with --pause-chapter seconds of digital silence
    chapters = _chapter_meta(tmp_path / "tides.work")
    for title, _ in inputs.CHAPTERS:
        meta = chapters[title]
        last_end = meta["sentences"][-1][3]
        assert meta["samples"] - last_end == round(1.5 * meta["rate"])
        assert meta["sentences"][0][2] == 0  # no head of room tone
