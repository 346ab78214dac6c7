"""ffmpeg: the audiobook's files (AAC in MP4 with chapters, or one MP3 / Opus / FLAC / WAV per
chapter), tagged, with the cover; and reading any audio file back for ``--check``.

ffmpeg is Debian's package (``tools/setup_system.sh`` installs it); it is looked up on ``PATH``
before anything else runs, and a missing one is a clear error.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from audiocpp.engine.errors import AudiocppError, UsageError

INSTALL_HINT = (
    "install ffmpeg: `sudo apt-get install ffmpeg` on Debian/Ubuntu (the repository's "
    "tools/setup_system.sh does it), `brew install ffmpeg` on macOS, or put an ffmpeg on PATH"
)
AAC_RATES = (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000, 64000, 88200, 96000)
MP3_RATES = (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000)
#: MPEG-1 Layer III: the only MP3 rates that carry ACX's 192 kbps (MPEG-2's 16-24 kHz stop at 160 kbps,
#: MPEG-2.5's 8-12 kHz at 64 kbps, and ffmpeg lowers a higher bit rate without a word)
MP3_FULL_RATES = (32000, 44100, 48000)
OPUS_RATES = (8000, 12000, 16000, 24000, 48000)


@dataclass(frozen=True)
class Format:
    name: str
    ext: str
    muxer: str
    codec: tuple[str, ...]
    bitrate: str | None  # default bitrate (None: lossless)
    rates: tuple[int, ...] | None  # rates the codec takes (None: any)
    cover: bool  # can carry the cover image

    def args(self, bitrate: str | None) -> list[str]:
        out = list(self.codec)
        if self.bitrate is not None:
            out += ["-b:a", bitrate or self.bitrate]
        return out


FORMATS = {
    "m4b": Format("m4b", ".m4b", "mp4", ("-c:a", "aac"), "64k", AAC_RATES, True),
    "m4a": Format("m4a", ".m4a", "mp4", ("-c:a", "aac"), "64k", AAC_RATES, False),
    # ACX takes 192 kbps constant bit rate MP3
    "mp3": Format(
        "mp3", ".mp3", "mp3", ("-c:a", "libmp3lame", "-id3v2_version", "3"), "192k", MP3_RATES, True
    ),
    "opus": Format(
        "opus", ".opus", "ogg", ("-c:a", "libopus", "-application", "voip"), "48k", OPUS_RATES, False
    ),
    "flac": Format("flac", ".flac", "flac", ("-c:a", "flac"), None, None, True),
    "wav": Format("wav", ".wav", "wav", ("-c:a", "pcm_s16le"), None, None, False),
}


def mp3_max_bits(rate: int) -> int:
    """The highest bit rate an MP3 at ``rate`` can have (bits a second)."""
    if rate in MP3_FULL_RATES:
        return 320_000
    return 160_000 if rate >= 16000 else 64_000


def bits_per_second(bitrate: str) -> int:
    """``192k`` or ``192000`` as bits a second (ValueError when it is neither)."""
    text = bitrate.strip().lower()
    try:
        bits = int(float(text[:-1]) * 1000) if text.endswith("k") else int(float(text))
    except OverflowError:  # inf
        raise ValueError(bitrate) from None
    if bits <= 0:
        raise ValueError(bitrate)
    return bits


def output_rate(fmt: Format, model_rate: int, requested: int | None, acx: bool) -> int:
    """The rate a file is written at: ``--sample-rate``, else the model's when the codec takes it
    (for MP3: when it carries 192 kbps; 44.1 kHz for ACX's MP3s), else 44.1 kHz (48 kHz for Opus)."""
    if requested is not None:
        if fmt.rates is not None and requested not in fmt.rates:
            raise UsageError(
                f"--sample-rate {requested} is not a rate {fmt.name} takes",
                hint="use one of " + ", ".join(map(str, fmt.rates)),
            )
        return requested
    if fmt.name == "mp3" and (acx or model_rate not in MP3_FULL_RATES):
        return 44100
    if fmt.rates is None or model_rate in fmt.rates:
        return model_rate
    return 48000 if fmt.name == "opus" else 44100


def find_ffmpeg(tool: str = "ffmpeg") -> str:
    path = shutil.which(tool)
    if path is None:
        raise UsageError(
            f"{tool} is not installed (not found on PATH); `audiocpp book` uses it to write and "
            "read audiobook files",
            hint=INSTALL_HINT,
        )
    return path


def run_ffmpeg(args: list[str], what: str) -> None:
    command = [find_ffmpeg(), "-nostdin", "-hide_banner", "-loglevel", "error", "-y", *args]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, errors="replace")
    except OSError as error:
        raise AudiocppError(
            f"cannot run ffmpeg to write {what}: {error.strerror or error}", hint=INSTALL_HINT
        ) from None
    if proc.returncode != 0:
        tail = " | ".join(line for line in proc.stderr.strip().splitlines()[-4:])
        full = "no space left on device" in proc.stderr.lower()
        raise AudiocppError(
            f"ffmpeg could not write {what}: {tail or f'exit code {proc.returncode}'}",
            hint="free some disk space and rerun"
            if full
            else "rerun the same command (finished chunks are kept); if it fails again, report it",
        )


def _escape(value: str) -> str:
    """A value in ffmpeg's metadata file: '=', ';', '#', '\\' and line ends escaped."""
    out = []
    for ch in value:
        if ch in "=;#\\\n":
            out.append("\\" + ch)
        elif ch == "\r":
            continue
        else:
            out.append(ch)
    return "".join(out)


def _concat_line(path: Path) -> str:
    return "file '" + str(path.resolve()).replace("'", "'\\''") + "'\n"


def metadata_file(path: Path, tags: dict[str, str], marks: list[tuple[str, float, float]]) -> None:
    lines = [";FFMETADATA1"]
    lines += [f"{key}={_escape(value)}" for key, value in tags.items() if value]
    for title, start, end in marks:
        lines += [
            "[CHAPTER]",
            "TIMEBASE=1/1000",
            f"START={round(start * 1000)}",
            f"END={round(end * 1000)}",
            f"title={_escape(title)}",
        ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_m4b(
    out: Path,
    sources: list[Path],
    marks: list[tuple[str, float, float]],
    tags: dict[str, str],
    cover: Path | None,
    rate: int,
    bitrate: str | None,
    scratch: Path,
) -> None:
    """One AAC-in-MP4 audiobook from the chapters' files, with chapter marks, tags and the cover."""
    fmt = FORMATS["m4b"]
    listing = scratch / "concat.txt"
    listing.write_text("".join(_concat_line(p) for p in sources), encoding="utf-8")
    meta = scratch / "metadata.txt"
    metadata_file(meta, tags, marks)
    args = ["-f", "concat", "-safe", "0", "-i", str(listing), "-i", str(meta)]
    if cover is not None:
        args += ["-i", str(cover)]
    args += ["-map", "0:a", "-map_metadata", "1", "-map_chapters", "1"]
    if cover is not None:
        args += ["-map", "2:v", "-c:v", "copy", "-disposition:v:0", "attached_pic"]
    args += [
        *fmt.args(bitrate),
        "-ac",
        "1",
        "-ar",
        str(rate),
        "-movflags",
        "+faststart",
        "-brand",
        "M4B ",
        "-f",
        fmt.muxer,
        str(out),
    ]
    run_ffmpeg(args, repr(out.name))


def write_track(
    out: Path,
    source: Path,
    fmt: Format,
    rate: int,
    bitrate: str | None,
    tags: dict[str, str],
    cover: Path | None,
) -> None:
    """One chapter as its own file, tagged (and with the cover where the format carries one)."""
    args = ["-i", str(source)]
    use_cover = cover is not None and fmt.cover
    if use_cover:
        args += [
            "-i",
            str(cover),
            "-map",
            "0:a",
            "-map",
            "1:v",
            "-c:v",
            "copy",
            "-disposition:v:0",
            "attached_pic",
        ]
    else:
        args += ["-map", "0:a"]
    for key, value in tags.items():
        if value:
            args += ["-metadata", f"{key}={value}"]
    args += [*fmt.args(bitrate), "-ac", "1", "-ar", str(rate), "-f", fmt.muxer, str(out)]
    run_ffmpeg(args, repr(out.name))


def probe(path: Path) -> dict[str, Any]:
    """ffprobe's view of a file: format, streams, chapters."""
    command = [
        find_ffmpeg("ffprobe"),
        "-v",
        "error",
        "-of",
        "json",
        "-show_format",
        "-show_streams",
        "-show_chapters",
        str(path),
    ]
    proc = subprocess.run(command, capture_output=True, text=True, errors="replace")
    if proc.returncode != 0:
        message = (
            proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit code {proc.returncode}"
        )
        raise UsageError(
            f"{str(path)!r} is not an audio file ffmpeg can read: {message}",
            hint="pass an .m4b, .m4a, .mp3, .opus, .flac or .wav file",
        )
    return json.loads(proc.stdout or "{}")


def decode(path: Path, rate: int, block: int = 1 << 20) -> Iterator[np.ndarray]:
    """The first audio stream of ``path`` as mono float32 at ``rate``, block by block."""
    command = [
        find_ffmpeg(),
        "-nostdin",
        "-v",
        "error",
        "-i",
        str(path),
        "-map",
        "0:a:0",
        "-ac",
        "1",
        "-ar",
        str(rate),
        "-f",
        "f32le",
        "-acodec",
        "pcm_f32le",
        "pipe:1",
    ]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    finished = False
    try:
        while True:
            data = proc.stdout.read(block * 4)
            if not data:
                break
            yield np.frombuffer(data[: len(data) // 4 * 4], dtype="<f4")
        finished = True
    finally:
        if not finished:
            proc.kill()
        proc.stdout.close()
        _, err = proc.communicate()
    if proc.returncode != 0:
        raise UsageError(
            f"ffmpeg could not decode {str(path)!r}: {err.decode(errors='replace').strip()[-300:]}",
            hint="check that the file is complete",
        )
