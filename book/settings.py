"""Everything a book job is told (the command line's flags; ``Book.render``'s keywords), and the checks
made on it before a model is loaded or a file written."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audiocpp.engine import fs
from audiocpp.engine.errors import UsageError

from .media import FORMATS, bits_per_second, mp3_max_bits
from .plan import DEFAULT_MAX_CHARS

MASTERING = ("acx", "none")
TRACK_FORMATS = ("mp3", "opus", "flac", "wav")
BOOK_EXTS = (".m4b", ".m4a", ".mp4")


@dataclass
class BookSettings:
    # outputs
    out: Path | None = None  # the .m4b
    out_dir: Path | None = None  # one file per chapter instead
    fmt: str | None = None  # with out_dir: mp3 (default), opus, flac, wav
    read_along: Path | None = None  # an EPUB 3 with Media Overlays
    captions: bool = True  # .srt and .vtt beside the audio
    word_captions: bool = False  # a cue per word instead of per sentence (families that time words)
    work_dir: Path | None = None
    # the model and the voice (the main command's flags)
    model: str | None = None
    family: str | None = None
    revision: str | None = None
    cache_dir: Path | None = None
    codec: Path | None = None
    device: str | None = None
    voice_ref: Path | None = None
    reference_text: str | None = None
    voice_prompt: Path | None = None
    instruct: str | None = None
    voice: str | None = None  # a named voice of the model, or a mix (Kokoro)
    language: str | None = None
    seed: int | None = None
    voice_continuity: str = "auto"
    request_options: dict[str, Any] = field(default_factory=dict)
    session_options: dict[str, Any] = field(default_factory=dict)
    load_options: dict[str, Any] = field(default_factory=dict)
    # what is read
    chapters: str | None = None
    chapter_titles: bool = True
    max_chunk_chars: int = DEFAULT_MAX_CHARS
    title: str | None = None
    author: str | None = None
    narrator: str = ""
    cover: Path | None = None
    # assembly and mastering
    pause_sentence: float = 0.35
    pause_paragraph: float = 0.8
    pause_chapter: float = 2.0
    master: str | None = None  # default: acx, whatever the output; none keeps the model's levels
    sample_rate: int | None = None
    bitrate: str | None = None
    # running
    batch_size: int | None = None  # default: the family's on its device (FamilyPlugin.max_batch)
    threads: int | None = None
    timeout: float | None = None  # seconds each chunk may take (its job's deadline)
    ray: bool = False
    ray_address: str | None = None
    workers: int = 1
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    progress: bool | None = None  # None: when stderr is a terminal
    quiet: bool = False

    @property
    def on_ray(self) -> bool:
        return self.ray or bool(self.ray_address)

    @property
    def mastering(self) -> str:
        return self.master or "acx"

    @property
    def track_format(self) -> str:
        return "m4b" if self.out is not None else (self.fmt or "mp3")

    def default_work_dir(self) -> Path:
        """``--work-dir``, else beside the output: ``BOOK.work`` for ``--out BOOK.m4b``, ``DIR.work`` for
        ``--out-dir DIR``. The output's path is made absolute first: ``--out-dir .`` has no name of its
        own, and ``..`` would put ``...work`` in the current folder."""
        if self.work_dir is not None:
            return self.work_dir
        output = self.out if self.out is not None else self.out_dir
        assert output is not None
        output = Path(os.path.abspath(output))
        if not output.name:  # the file system's root: inside it
            return output / "book.work"
        return output.with_name((output.stem if self.out is not None else output.name) + ".work")


def _writable_folder(folder: Path, what: str) -> None:
    if not fs.is_dir(folder):
        raise UsageError(
            f"the folder of {what} does not exist ({str(folder)!r})",
            hint=f"create it first (mkdir -p {folder}) or choose another path",
        )
    probe = folder / f".audiocpp-probe-{secrets.token_hex(6)}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as error:
        raise UsageError(
            f"cannot write {what}: {error.strerror or error} in {str(folder)!r}",
            hint="choose a folder you can write to",
        ) from None
    os.close(fd)
    os.unlink(probe)


def check_settings(s: BookSettings, *, listing: bool = False) -> None:
    """The flags alone: consistent, in range, outputs writable, inputs present (no model, no book)."""
    for name, value in (
        ("--pause-sentence", s.pause_sentence),
        ("--pause-paragraph", s.pause_paragraph),
        ("--pause-chapter", s.pause_chapter),
    ):
        if not 0 <= value <= 60:
            raise UsageError(f"{name} {value:g} must be between 0 and 60 seconds")
    if s.master is not None and s.master not in MASTERING:
        raise UsageError(f"--master {s.master!r} is not one of {', '.join(MASTERING)}")
    if s.batch_size is not None and s.batch_size < 1:
        raise UsageError(f"--batch-size {s.batch_size} must be at least 1")
    if s.threads is not None and s.threads < 1:
        raise UsageError(f"--threads {s.threads} must be at least 1")
    if s.timeout is not None and not s.timeout > 0:
        raise UsageError(f"--timeout {s.timeout:g} must be more than 0 seconds")
    if s.workers < 1:
        raise UsageError(f"--workers {s.workers} must be at least 1")
    if s.num_cpus <= 0 or s.num_gpus < 0:
        raise UsageError("--num-cpus must be above 0 and --num-gpus at least 0")
    if not 20 <= s.max_chunk_chars <= 2000:
        raise UsageError(f"--max-chunk-chars {s.max_chunk_chars} must be between 20 and 2000")
    if s.voice is not None and not s.voice.strip():
        raise UsageError(
            "--voice is empty", hint="name a voice (`audiocpp voices` lists them), or drop --voice"
        )
    if s.word_captions and not s.captions:
        raise UsageError(
            "--word-captions is for the captions, and --no-captions writes none", hint="drop one of the two"
        )
    if s.reference_text is not None and s.voice_ref is None:
        raise UsageError(
            "--reference-text needs --voice-ref (the audio it transcribes)",
            hint="pass --voice-ref FILE, or drop --reference-text",
        )
    for flag, path in (
        ("--voice-ref", s.voice_ref),
        ("--voice-prompt", s.voice_prompt),
        ("--cover", s.cover),
    ):
        if path is not None and not fs.is_file(path):
            raise UsageError(f"{flag} {str(path)!r} does not exist", hint="check the path")
    if listing:
        return
    if (s.out is None) == (s.out_dir is None):
        raise UsageError(
            "give one output: --out BOOK.m4b, or --out-dir DIR (one file per chapter)"
            if s.out is None
            else "give --out or --out-dir, not both",
            hint="e.g. --out book.m4b, or --out-dir book/ --format mp3",
        )
    if s.out is not None:
        if s.fmt is not None and s.fmt != "m4b":
            raise UsageError(
                f"--format {s.fmt} is for --out-dir (one file per chapter)",
                hint=f"drop --format (--out writes an .m4b), or use --out-dir DIR --format {s.fmt}",
            )
        if s.out.suffix.lower() not in BOOK_EXTS:
            raise UsageError(
                f"--out {str(s.out)!r}: name an .m4b file (AAC audio with chapters)",
                hint=f"e.g. --out {s.out.with_suffix('.m4b').name}, or --out-dir DIR --format mp3 "
                "for one file per chapter",
            )
        if fs.is_dir(s.out):
            raise UsageError(f"--out {str(s.out)!r} is a folder", hint="pass a file name, e.g. book.m4b")
        _writable_folder(s.out.parent, f"--out {str(s.out)!r}")
    else:
        assert s.out_dir is not None
        if s.fmt is not None and s.fmt not in TRACK_FORMATS:
            raise UsageError(
                f"--format {s.fmt!r} is not one of {', '.join(TRACK_FORMATS)}",
                hint="--out-dir writes one mp3, opus, flac or wav file per chapter",
            )
        if fs.exists(s.out_dir) and not fs.is_dir(s.out_dir):
            raise UsageError(
                f"--out-dir {str(s.out_dir)!r} is a file", hint="pass a folder (created if missing)"
            )
        _writable_folder(
            s.out_dir if fs.is_dir(s.out_dir) else s.out_dir.parent, f"--out-dir {str(s.out_dir)!r}"
        )
    if s.read_along is not None:
        if s.read_along.suffix.lower() != ".epub":
            raise UsageError(
                f"--read-along {str(s.read_along)!r}: name an .epub file",
                hint="e.g. --read-along book-read-along.epub",
            )
        _writable_folder(s.read_along.parent, f"--read-along {str(s.read_along)!r}")
    if s.bitrate is not None and FORMATS[s.track_format].bitrate is None:
        raise UsageError(
            f"--bitrate is for lossy formats; {s.track_format} is lossless", hint="drop --bitrate"
        )
    _check_bitrate(s)


def _check_bitrate(s: BookSettings) -> None:
    """A ``--bitrate`` ffmpeg reads, and one the MP3 rate can carry (ffmpeg would quietly lower it)."""
    fmt = FORMATS[s.track_format]
    if fmt.bitrate is None:
        return
    try:
        bits = bits_per_second(s.bitrate or fmt.bitrate)
    except ValueError:
        raise UsageError(
            f"--bitrate {s.bitrate!r} is not a bit rate", hint=f"e.g. --bitrate {fmt.bitrate}"
        ) from None
    if fmt.name == "mp3" and s.sample_rate is not None and bits > mp3_max_bits(s.sample_rate):
        top = mp3_max_bits(s.sample_rate) // 1000
        raise UsageError(
            f"an MP3 at --sample-rate {s.sample_rate} holds at most {top} kbps, not {bits // 1000}",
            hint=f"use --sample-rate 44100 (ACX's rate; 32000 and 48000 also take 192 kbps), or "
            f"--bitrate {top}k or lower",
        )
