"""Reading and writing audio files with soundfile.

Reading follows OmniVoice's ``load_waveform``: ``soundfile.read(dtype="float32",
always_2d=True)``, channels first, and a mono mixdown by the mean over channels. Writing goes
to a temporary file in the destination's folder that is renamed over the destination only
once complete, so a failed or interrupted write never leaves a partial file behind.

Every failure a user can cause (missing file, a file that is not audio, a truncated or empty
file, an unwritable destination) is an ``AudioError`` with a hint, never a soundfile traceback.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import numpy as np

from .. import fs
from ..errors import AudioError
from ..records import AudioBuffer
from .wav import declared_wav_truncation

# fmt -> (soundfile format, subtype)
WRITE_FORMATS: dict[str, tuple[str, str]] = {
    "wav16": ("WAV", "PCM_16"),
    "wav24": ("WAV", "PCM_24"),
    "wav32": ("WAV", "FLOAT"),
    "flac": ("FLAC", "PCM_16"),
    "ogg": ("OGG", "VORBIS"),
}
#: formats of the synthesis command beyond those: lossy codecs where the installed libsndfile
#: writes them (mp3 since 1.1.0), and headerless 16-bit little-endian samples
MORE_FORMATS: dict[str, tuple[str, str]] = {
    "mp3": ("MP3", "MPEG_LAYER_III"),
    "opus": ("OGG", "OPUS"),
    "pcm16": ("RAW", "PCM_16"),
}
ALL_FORMATS = {**WRITE_FORMATS, **MORE_FORMATS}
#: the sample rates the lossy codecs take (libsndfile refuses others)
CODEC_RATES: dict[str, tuple[int, ...]] = {
    "mp3": (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000),
    "opus": (8000, 12000, 16000, 24000, 48000),
}


def available_write_formats() -> list[str]:
    """The formats of :data:`ALL_FORMATS` that the installed libsndfile writes (soundfile says)."""
    import soundfile as sf

    majors = sf.available_formats()
    return [fmt for fmt, (major, subtype) in ALL_FORMATS.items()
            if major in majors and subtype in sf.available_subtypes(major)]


def check_write_format(fmt: str, flag: str = "--format") -> None:  # flag: what asked for it, for the message
    """``fmt`` is one of ours and the installed libsndfile writes it; else one clear error."""
    from ..errors import UsageError

    available = available_write_formats()
    if fmt in available:
        return
    if fmt in ALL_FORMATS:
        import soundfile as sf

        raise UsageError(f"cannot write {fmt} ({flag}): the installed libsndfile "
                         f"({sf.__libsndfile_version__}) does not write {fmt}",
                         hint=f"formats available here: {', '.join(available)}; {fmt} needs a libsndfile "
                         "built with it (mp3: 1.1.0 or later with LAME and mpg123; opus: libopus)")
    raise UsageError(f"{flag} {fmt!r} is not supported", hint=f"use one of: {', '.join(available)}")


def encode_audio(audio: AudioBuffer, fmt: str) -> bytes:
    """``audio`` as the bytes of a ``fmt`` file (for writing to a pipe)."""
    import soundfile as sf

    check_write_format(fmt)
    major, subtype = ALL_FORMATS[fmt]
    try:
        return _encode(np.asarray(audio.samples, dtype=np.float32), audio.sample_rate, major, subtype)
    except (sf.LibsndfileError, RuntimeError, ValueError) as error:
        raise AudioError(f"cannot encode the audio as {fmt}: {error}",
                         hint="try another format (wav16 always works)") from None


def _encode(samples: np.ndarray, sample_rate: int, major: str, subtype: str) -> bytes:
    import io

    import soundfile as sf

    buffer = io.BytesIO()
    sf.write(buffer, samples, sample_rate, subtype=subtype, format=major)
    return buffer.getvalue()

#: the most samples (frames x channels) one read decodes: 2^26 float32 (256 MiB), 23 minutes of mono
#: 48 kHz audio; a header claiming more (a lie, or a decompression bomb) is refused before decoding
MAX_DECODED_SAMPLES = 1 << 26

_READ_HINT = "use a WAV, FLAC, OGG or MP3 file (convert others with e.g. `ffmpeg -i in.m4a out.wav`)"


def audio_duration(path: str | os.PathLike[str]) -> float | None:
    """Seconds of audio in ``path`` from its header, or None when the header cannot be read
    (reading it for real reports why, with its own hint)."""
    import soundfile as sf

    try:
        info = sf.info(str(path))
    except Exception:  # noqa: BLE001 - any unreadable header is reported by the real read
        return None
    return float(info.frames) / info.samplerate if info.samplerate > 0 else None


def _check_readable(path: Path) -> None:
    if not fs.exists(path):
        raise AudioError(f"audio file {str(path)!r} does not exist", hint="check the path")
    if fs.is_dir(path):
        raise AudioError(f"{str(path)!r} is a folder, not an audio file", hint="pass the path of a file")
    if not os.access(path, os.R_OK):
        raise AudioError(f"audio file {str(path)!r} is not readable", hint="check its permissions")


def read_audio_channels(path: str | os.PathLike[str], *,
                        max_seconds: float | None = None) -> tuple[np.ndarray, int]:
    """All channels of ``path`` as float32 ``(C, T)`` and the sample rate (``max_seconds``: as for
    :func:`read_audio`)."""
    data, sample_rate = _read_frames(Path(path), max_seconds)
    return np.ascontiguousarray(data.T), sample_rate


def read_audio(path: str | os.PathLike[str], *, max_seconds: float | None = None) -> AudioBuffer:
    """``path`` as mono float32 at its own rate (mean over channels, as upstream).
    ``max_seconds``: refuse a longer file from its header, before decoding it (uploads)."""
    data, sample_rate = _read_frames(Path(path), max_seconds)
    channels_first = data.T
    if channels_first.shape[0] > 1:
        channels_first = np.mean(channels_first, axis=0, keepdims=True)
    return AudioBuffer(channels_first[0], sample_rate)


def _read_frames(path: Path, max_seconds: float | None = None) -> tuple[np.ndarray, int]:
    """``soundfile.read(path, dtype="float32", always_2d=True)``: ``(T, C)`` and the rate."""
    import soundfile as sf

    _check_readable(path)
    truncation = declared_wav_truncation(path)
    if truncation is not None:
        declared, present = truncation
        raise AudioError(
            f"audio file {str(path)!r} is truncated: its header declares {declared} bytes of "
            f"samples but only {present} are present",
            hint="the file was cut short (an interrupted copy or download?); get a complete copy",
        )
    try:
        with sf.SoundFile(str(path)) as handle:
            declared = handle.frames * handle.channels
            if declared > MAX_DECODED_SAMPLES:  # the header's word: refused before allocating for it
                minutes = handle.frames / max(handle.samplerate, 1) / 60
                raise AudioError(
                    f"audio file {str(path)!r} claims {handle.frames} frames of {handle.channels} channels "
                    f"({minutes:.0f} min at {handle.samplerate} Hz): more than the {MAX_DECODED_SAMPLES} "
                    "samples audiocpp decodes at once",
                    hint="pass a shorter clip (e.g. `ffmpeg -i in.wav -t 30 -ac 1 out.wav`); a damaged "
                    "header can claim this too",
                )
            if max_seconds is not None and handle.frames > max_seconds * max(handle.samplerate, 1):
                raise AudioError(f"audio file {str(path)!r} is "
                                 f"{handle.frames / max(handle.samplerate, 1):.1f} s "
                                 f"long; at most {max_seconds:g} s are accepted here",
                                 hint="pass a shorter clip (e.g. `ffmpeg -i in.wav -t 20 out.wav`)")
            if handle.seekable():
                handle.seek(0)  # as soundfile.read does (the MP3 decoder's output depends on it)
            data = handle.read(dtype="float32", always_2d=True)
            sample_rate = handle.samplerate
    except (sf.LibsndfileError, RuntimeError, ValueError, TypeError) as error:
        detail = getattr(error, "error_string", None) or str(error) or type(error).__name__
        raise AudioError(f"cannot decode audio file {str(path)!r}: {detail}", hint=_READ_HINT) from None
    except OSError as error:
        raise AudioError(f"cannot read audio file {str(path)!r}: {error.strerror or error}",
                         hint="check the path and its permissions") from None
    if data.shape[0] == 0 or data.shape[1] == 0:
        raise AudioError(f"audio file {str(path)!r} holds no samples", hint="pass a file with audio in it")
    if sample_rate <= 0:
        raise AudioError(f"audio file {str(path)!r} has an invalid sample rate {sample_rate}",
                         hint=_READ_HINT)
    return data, int(sample_rate)


def write_audio(path: str | os.PathLike[str], audio: AudioBuffer, fmt: str) -> None:
    """Write ``audio`` to ``path`` as ``fmt`` (wav16, wav24, wav32 (float), flac, ogg, and mp3 / opus where
    libsndfile writes them, pcm16 raw), atomically.

    Samples outside [-1, 1] are clipped by soundfile for the integer formats (wav32 keeps
    them as floats).
    """
    import soundfile as sf

    if fmt not in ALL_FORMATS:
        raise AudioError(f"audio format {fmt!r} is not supported",
                         hint=f"use one of: {', '.join(ALL_FORMATS)}")
    major, subtype = ALL_FORMATS[fmt]
    samples = np.asarray(audio.samples, dtype=np.float32)
    if audio.sample_rate <= 0:
        raise AudioError(f"cannot write audio with sample rate {audio.sample_rate}")
    if not np.isfinite(samples).all():
        raise AudioError("the audio to write contains NaN or infinite samples",
                         hint="this is a bug in the model or its options; please report it")
    dest = Path(path)
    folder = dest.parent
    if not fs.is_dir(folder):
        raise AudioError(f"cannot write {str(dest)!r}: the folder {str(folder)!r} does not exist",
                         hint="create the folder first or choose another output path")
    if fs.is_dir(dest):
        raise AudioError(f"cannot write {str(dest)!r}: it is a folder", hint="pass a file name")
    tmp = folder / f".{dest.name}.{secrets.token_hex(6)}.tmp"
    try:
        # O_EXCL: never clobber another writer's file; 0o666 lets the umask decide the mode.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as error:
        raise AudioError(f"cannot write {str(dest)!r}: {error.strerror or error}",
                         hint="check that the folder exists and is writable") from None
    try:
        # Encoded in memory first, then written with plain file I/O: soundfile's writes to a Python
        # file run in cffi callbacks, where a full disk printed "Exception ignored" tracebacks
        # and then failed an assertion instead of raising OSError (ENOSPC).
        data = _encode(samples, audio.sample_rate, major, subtype)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, dest)
    except BaseException as error:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(error, (sf.LibsndfileError, RuntimeError, ValueError)):
            raise AudioError(f"cannot write {str(dest)!r} as {fmt}: {error}",
                             hint="try another format (wav16 always works)") from None
        if isinstance(error, OSError):
            raise AudioError(f"cannot write {str(dest)!r}: {error.strerror or error}",
                             hint="check the free disk space and the folder's permissions") from None
        raise
