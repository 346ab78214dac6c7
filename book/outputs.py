"""The finished files: every one written under a temporary name and renamed into place only when all
of them are complete, so a failure (a full disk, ffmpeg stopping, Ctrl-C) leaves no partial output."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from audiocpp.engine.errors import AudiocppError
from audiocpp.engine.text.captions import TimedCue, to_srt, to_vtt

from .media import FORMATS, bits_per_second, output_rate, write_m4b, write_track
from .read_along import ReadAlongChapter, SpokenSentence, write_read_along
from .text import Cover


@dataclass
class ChapterOut:
    number: int
    title: str
    file: Path  # the assembled chapter (work folder)
    rate: int
    samples: int
    sentences: list[tuple[str, int, int, int]]  # text, paragraph, start, end (samples)
    #: per sentence, its timed words: (first char, end char) in its text, (start, end) in samples
    words: list[list[tuple[int, int, int, int]]] = field(default_factory=list)

    def sentence_words(self, index: int) -> list[tuple[int, int, int, int]]:
        return self.words[index] if index < len(self.words) else []

    @property
    def duration(self) -> float:
        return self.samples / self.rate


@dataclass
class BookMeta:
    title: str
    author: str
    language: str
    narrator: str
    cover: Cover | None
    identity: str  # stable text for the read-along book's identifier


@dataclass
class Staged:
    """Temporary files and where each goes."""

    moves: list[tuple[Path, Path]] = field(default_factory=list)

    def temp_for(self, dest: Path) -> Path:
        tmp = dest.with_name(f".{dest.name}.{secrets.token_hex(6)}.tmp")
        self.moves.append((tmp, dest))
        return tmp

    def commit(self) -> None:
        for tmp, dest in self.moves:
            os.replace(tmp, dest)
        self.moves.clear()

    def discard(self) -> None:
        for tmp, _ in self.moves:
            with contextlib.suppress(OSError):
                tmp.unlink()
        self.moves.clear()


def safe_name(title: str, fallback: str) -> str:
    name = re.sub(r'[\x00-\x1f/\\:*?"<>|]+', " ", title)
    name = re.sub(r"\s+", " ", name).strip(" .")[:80].strip()
    return name or fallback


def remove_stale(dest: Path) -> None:
    """Temporary files a killed run left for ``dest``."""
    if dest.parent.is_dir():
        for tmp in dest.parent.glob(f".{dest.name}.*.tmp"):
            with contextlib.suppress(OSError):
                tmp.unlink()


def _tags(meta: BookMeta, **extra: str) -> dict[str, str]:
    tags = {
        "album": meta.title,
        "artist": meta.author,
        "album_artist": meta.author,
        "composer": meta.narrator,
        "genre": "Audiobook",
    }
    tags.update(extra)
    return tags


def _cues(chapter: ChapterOut, offset: float, by_word: bool = False) -> list[TimedCue]:
    """A cue per sentence; ``by_word``: a cue per timed word (a sentence without any: one cue)."""
    cues = []
    for index, (text, _, start, end) in enumerate(chapter.sentences):
        words = chapter.sentence_words(index) if by_word else []
        if not words:
            cues.append(TimedCue(offset + start / chapter.rate, offset + end / chapter.rate, text))
        for first, last, a, b in words:
            cues.append(TimedCue(offset + a / chapter.rate, offset + b / chapter.rate, text[first:last]))
    return cues


def estimate_bytes(chapters: list[ChapterOut], fmt_name: str, rate: int, bitrate: str | None) -> int:
    seconds = sum(c.duration for c in chapters)
    fmt = FORMATS[fmt_name]
    if fmt.bitrate is not None:
        rate_bits = bits_per_second(bitrate or fmt.bitrate)
        return int(seconds * rate_bits / 8 * 1.05) + (1 << 20)
    return int(seconds * rate * 2 * (0.7 if fmt_name == "flac" else 1.0)) + (1 << 20)


def check_space(folder: Path, needed: int, what: str, work: Path) -> None:
    """Enough free space in ``folder`` for ``needed`` bytes, or a clear error (before any writing)."""
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise AudiocppError(
            f"not enough disk space for {what}: it needs about {needed / 2**20:.0f} MiB and "
            f"{str(folder)!r} has {free / 2**20:.0f} MiB free",
            hint=f"free some space (or write elsewhere) and rerun: the synthesized audio is kept "
            f"in {str(work)!r}, so only the files are written again",
        )


def write_book(
    out: Path,
    chapters: list[ChapterOut],
    meta: BookMeta,
    *,
    rate: int,
    bitrate: str | None,
    captions: bool,
    scratch: Path,
    staged: Staged,
    acx: bool,
    word_captions: bool = False,
) -> list[Path]:
    """The .m4b (and its .srt and .vtt): one AAC file, a chapter mark per chapter."""
    marks, cues, offset = [], [], 0.0
    for chapter in chapters:
        marks.append((chapter.title or meta.title, offset, offset + chapter.duration))
        cues += _cues(chapter, offset, word_captions)
        offset += chapter.duration
    cover = _cover_file(meta.cover, scratch)
    tmp = staged.temp_for(out)
    write_m4b(
        tmp, [c.file for c in chapters], marks, _tags(meta, title=meta.title), cover, rate, bitrate, scratch
    )
    written = [out]
    if captions:
        written += _captions(out.with_suffix(""), cues, staged)
    return written


def write_tracks(
    folder: Path,
    chapters: list[ChapterOut],
    meta: BookMeta,
    *,
    fmt_name: str,
    rate: int,
    bitrate: str | None,
    captions: bool,
    scratch: Path,
    staged: Staged,
    word_captions: bool = False,
) -> list[Path]:
    """One file per chapter (numbered, tagged), each with its captions, and an .m3u playlist."""
    fmt = FORMATS[fmt_name]
    cover = _cover_file(meta.cover, scratch) if fmt.cover else None
    width = max(2, len(str(len(chapters))))
    playlist = ["#EXTM3U", f"#PLAYLIST:{meta.title}"]
    written: list[Path] = []
    for index, chapter in enumerate(chapters, start=1):
        stem = f"{index:0{width}d} - {safe_name(chapter.title, f'Chapter {chapter.number}')}"
        dest = folder / f"{stem}{fmt.ext}"
        tags = _tags(meta, title=chapter.title or meta.title, track=f"{index}/{len(chapters)}")
        write_track(staged.temp_for(dest), chapter.file, fmt, rate, bitrate, tags, cover)
        written.append(dest)
        if captions:
            written += _captions(folder / stem, _cues(chapter, 0.0, word_captions), staged)
        who = f"{meta.author} - " if meta.author else ""
        playlist += [f"#EXTINF:{round(chapter.duration)},{who}{chapter.title or meta.title}", dest.name]
    listing = folder / f"{safe_name(meta.title, 'book')}.m3u"
    staged.temp_for(listing).write_text("\n".join(playlist) + "\n", encoding="utf-8")
    written.append(listing)
    return written


def write_read_along_book(
    dest: Path, chapters: list[ChapterOut], meta: BookMeta, *, rate: int, scratch: Path, staged: Staged
) -> Path:
    """The EPUB 3 with Media Overlays: each chapter's audio as AAC, each sentence (each word, where the
    family times words) a clip of it."""
    fmt = FORMATS["m4a"]
    parts = []
    for chapter in chapters:
        audio = scratch / f"c{chapter.number:04d}.m4a"
        write_track(audio, chapter.file, fmt, rate, None, {"title": chapter.title}, None)
        rate = chapter.rate
        sentences = [
            SpokenSentence(
                text,
                paragraph,
                start / rate,
                end / rate,
                [(first, last, a / rate, b / rate) for first, last, a, b in chapter.sentence_words(index)],
            )
            for index, (text, paragraph, start, end) in enumerate(chapter.sentences)
        ]
        parts.append(ReadAlongChapter(chapter.number, chapter.title, sentences, chapter.duration, audio))
    write_read_along(
        staged.temp_for(dest),
        parts,
        title=meta.title,
        author=meta.author,
        language=meta.language,
        narrator=meta.narrator,
        cover=meta.cover,
        seed_text=meta.identity,
    )
    return dest


def _captions(stem: Path, cues: list[TimedCue], staged: Staged) -> list[Path]:
    srt, vtt = stem.with_name(stem.name + ".srt"), stem.with_name(stem.name + ".vtt")
    staged.temp_for(srt).write_text(to_srt(cues), encoding="utf-8")
    staged.temp_for(vtt).write_text(to_vtt(cues), encoding="utf-8")
    return [srt, vtt]


def _cover_file(cover: Cover | None, scratch: Path) -> Path | None:
    if cover is None:
        return None
    path = scratch / f"cover{cover.extension}"
    path.write_bytes(cover.data)
    return path


def rate_for(fmt_name: str, model_rate: int, requested: int | None, acx: bool) -> int:
    return output_rate(FORMATS[fmt_name], model_rate, requested, acx)
