"""What a new user gets without asking: ACX mastering for every output (so `--check` passes on
`--out-dir` tracks), MP3s at the 192 kbps CBR the docs promise (with `--master none` too), a log line
without "a omnivoice", and the work folder beside the output whatever the current folder is."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from audiocpp.book.media import FORMATS, output_rate
from audiocpp.book.readers import read_book
from audiocpp.book.readers.documents import MAX_TEXT_BYTES
from audiocpp.book.settings import BookSettings, check_settings
from audiocpp.book.voice import Narration
from audiocpp.engine.errors import UsageError
from tests.support import run_cli

from . import inputs
from .conftest import FAMILY_FLAGS, ffprobe, needs_ffmpeg, ok, run_book

FAMILY = "omnivoice"
#: "a" before a word starting with a vowel letter ("a omnivoice", "a HTML" is caught by its own test)
WRONG_ARTICLE = re.compile(r"\ba [aeiou]", re.IGNORECASE)


def _tracks(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.mp3"))


@pytest.fixture(scope="module")
def default_run(tiny_models, tmp_path_factory) -> dict:
    """A run with no --master and no --format, from a folder of its own, writing to its parent."""
    root = tmp_path_factory.mktemp("book-defaults") / "tides"
    here = root / "here"
    here.mkdir(parents=True)
    book = inputs.write_markdown(root / "tides.md")
    summary = ok(
        run_book(
            "../tides.md",
            "--model",
            tiny_models[FAMILY],
            "--out-dir",
            "..",
            "--seed",
            "4",
            *FAMILY_FLAGS[FAMILY],
            cwd=here,
        )
    )
    return {"root": root, "here": here, "book": book, "summary": summary}


@needs_ffmpeg
def test_default_out_dir_tracks_pass_check(default_run) -> None:
    tracks = _tracks(default_run["root"])
    assert len(tracks) == len(inputs.CHAPTERS)
    for track in tracks:
        proc = run_cli("book", track, "--check")
        assert proc.returncode == 0 and "acx: pass" in proc.stdout, proc.stdout + proc.stderr


@needs_ffmpeg
def test_default_mp3_is_192k_cbr_at_44100(default_run) -> None:
    from mutagen.mp3 import MP3, BitrateMode

    for track in _tracks(default_run["root"]):
        stream = ffprobe(track)["streams"][0]
        assert (stream["codec_name"], stream["bit_rate"], stream["sample_rate"]) == ("mp3", "192000", "44100")
        assert MP3(track).info.bitrate_mode == BitrateMode.CBR


@needs_ffmpeg
def test_unmastered_mp3_of_a_24k_model_is_still_192k(tiny_models, tmp_path) -> None:
    """MP3 at the model's 24 kHz stops at 160 kbps (MPEG-2): the file is written at 44.1 kHz instead."""
    book = inputs.write_markdown(tmp_path / "tides.md")
    ok(
        run_book(
            book,
            "--model",
            tiny_models[FAMILY],
            "--out-dir",
            tmp_path / "plain",
            "--master",
            "none",
            "--chapters",
            "3",
            "--no-captions",
            "--seed",
            "4",
            *FAMILY_FLAGS[FAMILY],
        )
    )
    (track,) = _tracks(tmp_path / "plain")
    stream = ffprobe(track)["streams"][0]
    assert (stream["bit_rate"], stream["sample_rate"]) == ("192000", "44100")


def test_mp3_rates_that_cannot_carry_192k_are_not_chosen_or_are_refused(tmp_path) -> None:
    mp3 = FORMATS["mp3"]
    assert output_rate(mp3, 24000, None, acx=False) == 44100
    assert output_rate(mp3, 16000, None, acx=False) == 44100
    assert output_rate(mp3, 48000, None, acx=False) == 48000
    assert output_rate(mp3, 48000, None, acx=True) == 44100
    low = BookSettings(out_dir=tmp_path / "tracks", sample_rate=24000)
    with pytest.raises(UsageError, match="at most 160 kbps"):
        check_settings(low)
    low.bitrate = "128k"
    check_settings(low)  # a bit rate the rate carries
    for wrong in ("fast", "inf", "0k"):
        low.bitrate = wrong
        with pytest.raises(UsageError, match="not a bit rate"):
            check_settings(low)


def test_every_output_is_mastered_by_default(tmp_path) -> None:
    for settings in (
        BookSettings(out=tmp_path / "b.m4b"),
        *(BookSettings(out_dir=tmp_path / "d", fmt=fmt) for fmt in (None, "mp3", "opus", "flac", "wav")),
    ):
        assert settings.mastering == "acx"
    assert BookSettings(out_dir=tmp_path / "d", master="none").mastering == "none"


@needs_ffmpeg
def test_the_voice_line_has_no_wrong_article(default_run) -> None:
    voice = default_run["summary"]["voice"]
    assert voice == "the first chunk's voice (its own omnivoice tts request) is cloned by every other chunk"
    for family in ("omnivoice", "audio8_tts", "voxcpm2", "voxcpm1", "kokoro"):
        for narration in (
            Narration("anchor", "clone", anchor_task="tts"),
            Narration("designed", "clone", anchor_task="design"),
            Narration("as-given", "tts"),
            Narration("named", "tts"),
        ):
            assert not WRONG_ARTICLE.search(narration.describe(family)), narration.describe(family)


def test_an_oversized_html_book_message_has_no_wrong_article(tmp_path) -> None:
    big = tmp_path / "big.html"
    with big.open("wb") as handle:
        handle.truncate(MAX_TEXT_BYTES + 1)  # sparse: nothing is written
    with pytest.raises(UsageError) as caught:
        read_book(big)
    assert "MiB of HTML" in caught.value.message and not WRONG_ARTICLE.search(caught.value.message)


@needs_ffmpeg
def test_the_work_folder_is_beside_the_output_not_in_the_current_folder(default_run) -> None:
    assert sorted(default_run["here"].iterdir()) == []
    work = default_run["root"].with_name("tides.work")
    assert default_run["summary"]["work_dir"] == str(work) and (work / "chunks").is_dir()


@needs_ffmpeg
def test_out_dir_dot_writes_its_work_folder_beside_it(tiny_models, tmp_path) -> None:
    here = tmp_path / "tracks"
    here.mkdir()
    book = inputs.write_markdown(tmp_path / "tides.md")
    summary = ok(
        run_book(
            book,
            "--model",
            tiny_models[FAMILY],
            "--out-dir",
            ".",
            "--chapters",
            "3",
            "--seed",
            "4",
            *FAMILY_FLAGS[FAMILY],
            cwd=here,
        )
    )
    assert summary["work_dir"] == str(tmp_path / "tracks.work") and (tmp_path / "tracks.work").is_dir()
    assert not [p for p in here.iterdir() if p.name.endswith(".work")]


def test_default_work_dir_of_odd_output_paths(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert BookSettings(out_dir=Path(".")).default_work_dir() == tmp_path.with_name(tmp_path.name + ".work")
    assert BookSettings(out_dir=Path("..")).default_work_dir() == tmp_path.parent.with_name(
        tmp_path.parent.name + ".work"
    )
    assert BookSettings(out_dir=Path("notes/")).default_work_dir() == tmp_path / "notes.work"
    assert BookSettings(out=Path("novel.m4b")).default_work_dir() == tmp_path / "novel.work"
    assert BookSettings(out_dir=Path("/")).default_work_dir() == Path("/book.work")
    assert BookSettings(out=Path("novel.m4b"), work_dir=Path("w")).default_work_dir() == Path("w")
