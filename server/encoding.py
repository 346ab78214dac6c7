"""Response audio: OpenAI's ``response_format`` values encoded in memory with soundfile.

``wav`` is 16-bit PCM WAV written exactly as the CLI's ``wav16`` (so the bytes match a CLI
run), ``flac`` is 16-bit FLAC, ``pcm`` is raw 16-bit little-endian mono at the model's rate
(the same float-to-int conversion as ``wav``), ``mp3`` and ``opus`` (Ogg) only where the
installed libsndfile can write them, ``aac`` (ADTS) with PyAV (the ``serve`` extra installs it), else
with an ``ffmpeg`` on PATH that has an AAC encoder; each is probed once by encoding a short silence.
The lossy codecs take only some sample rates (:func:`format_rates`), checked before a request is queued.
"""

from __future__ import annotations

import io
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache

import numpy as np

from audiocpp.engine.audio.wav import wav_header
from audiocpp.engine.records import AudioBuffer

from .errors import ApiError


@dataclass(frozen=True)
class AudioFormat:
    name: str
    media_type: str
    major: str  # soundfile format
    subtype: str
    streams_incrementally: bool  # whether stream_format=audio sends it piece by piece


FORMATS: dict[str, AudioFormat] = {
    "wav": AudioFormat("wav", "audio/wav", "WAV", "PCM_16", True),
    "pcm": AudioFormat("pcm", "audio/pcm", "RAW", "PCM_16", True),
    "flac": AudioFormat("flac", "audio/flac", "FLAC", "PCM_16", False),
    "mp3": AudioFormat("mp3", "audio/mpeg", "MP3", "MPEG_LAYER_III", False),
    "opus": AudioFormat("opus", "audio/ogg", "OGG", "OPUS", False),
    "aac": AudioFormat("aac", "audio/aac", "ADTS", "AAC", False),  # PyAV, not libsndfile
}
#: The output sample rates a request may ask for (``sample_rate``; the CLI's ``--sample-rate`` too).
MIN_RATE, MAX_RATE = 8000, 192000
#: Sample rates the AAC encoder takes (MPEG-4's sampling-frequency table, 8 to 96 kHz).
AAC_RATES = (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000, 64000, 88200, 96000)


def format_rates(name: str) -> tuple[int, ...]:
    """The sample rates a format takes (empty: any in MIN_RATE..MAX_RATE): mp3's and opus's as
    libsndfile's encoders take them (engine.audio.io.CODEC_RATES), AAC's table."""
    from audiocpp.engine.audio.io import CODEC_RATES

    return AAC_RATES if name == "aac" else tuple(CODEC_RATES.get(name, ()))


#: What a server without an AAC encoder says (``response_format: "aac"``'s 400).
AAC_FIX = ("needs PyAV or an ffmpeg with an AAC encoder, and this server has neither: "
           "pip install 'audiocpp[serve]' (PyAV), or install ffmpeg")


@cache
def available(name: str) -> bool:
    """Whether this machine writes ``name`` (libsndfile; PyAV or ffmpeg for aac), probed once by a real
    encode."""
    fmt = FORMATS.get(name)
    if fmt is None:
        return False
    try:
        _write(np.zeros(2400, np.float32), 24000, fmt)
    except Exception:  # libsndfile without the encoder raises one of several types
        return False
    return True


def available_formats() -> list[str]:
    return [name for name in FORMATS if available(name)]


def check_format(name: str) -> AudioFormat:
    """The format called ``name``, or a 400 naming the formats this server writes."""
    fmt = FORMATS.get(name)
    if fmt is None or not available(name):
        why = ("is not a response format" if fmt is None
               else AAC_FIX if name == "aac"
               else "cannot be written by this machine's libsndfile")
        raise ApiError(400, f"response_format {name!r} {why}; use one of: {', '.join(available_formats())}",
                       param="response_format", code="unsupported_format")
    return fmt


def _write(samples: np.ndarray, sample_rate: int, fmt: AudioFormat) -> bytes:
    if fmt.name == "aac":
        return _write_aac(samples, sample_rate)
    import soundfile as sf

    buffer = io.BytesIO()
    kwargs = {"endian": "LITTLE"} if fmt.major == "RAW" else {}
    sf.write(buffer, samples, sample_rate, subtype=fmt.subtype, format=fmt.major, **kwargs)
    return buffer.getvalue()


def _write_aac(samples: np.ndarray, sample_rate: int) -> bytes:
    """AAC in ADTS frames (what ``audio/aac`` players and OpenAI's ``aac`` are): PyAV's FFmpeg, else the
    ``ffmpeg`` program (a server installed without the ``serve`` extra's PyAV)."""
    try:
        import av  # noqa: F401
    except ImportError:
        return _ffmpeg_aac(samples, sample_rate)
    return _pyav_aac(samples, sample_rate)


def _ffmpeg_aac(samples: np.ndarray, sample_rate: int) -> bytes:
    """ADTS AAC from the ``ffmpeg`` on PATH, float32 samples in through a pipe."""
    exe = shutil.which("ffmpeg")
    if exe is None:
        raise RuntimeError("no PyAV and no ffmpeg to encode AAC with")
    cmd = [exe, "-hide_banner", "-loglevel", "error", "-f", "f32le", "-ar", str(sample_rate), "-ac", "1",
           "-i", "pipe:0", "-c:a", "aac", "-f", "adts", "pipe:1"]
    pcm = np.ascontiguousarray(samples, dtype="<f4").tobytes()
    done = subprocess.run(cmd, input=pcm, capture_output=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ffmpeg could not encode AAC: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def _pyav_aac(samples: np.ndarray, sample_rate: int) -> bytes:
    import av

    buffer = io.BytesIO()
    with av.open(buffer, "w", format="adts") as container:
        stream = container.add_stream("aac", rate=sample_rate, layout="mono")
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(samples, dtype=np.float32)[None, :],
                                           format="flt", layout="mono")
        frame.sample_rate = sample_rate
        for packet in stream.encode(frame if samples.size else None):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return buffer.getvalue()


def encode(audio: AudioBuffer, fmt: AudioFormat) -> bytes:
    """The whole audio as one file (or raw PCM) of ``fmt``."""
    samples = np.asarray(audio.samples, dtype=np.float32)
    if not np.isfinite(samples).all():
        raise RuntimeError("the synthesized audio contains NaN or infinite samples")
    rate = audio.sample_rate
    allowed = format_rates(fmt.name)
    if allowed and rate not in allowed:  # planned rates are checked; this keeps encode total
        from audiocpp.engine.audio.resample import resample

        samples, rate = np.asarray(resample(samples, rate, 48000), dtype=np.float32), 48000
    if samples.size == 0 and fmt.major == "RAW":
        return b""
    return _write(samples, rate, fmt)


def pcm16(audio: AudioBuffer) -> bytes:
    """Raw 16-bit little-endian PCM of a piece (the conversion of ``wav``, sample by sample)."""
    return encode(audio, FORMATS["pcm"])


def wav_stream_header(sample_rate: int) -> bytes:
    """A 16-bit mono WAV header for a stream of unknown length (sizes 0xFFFFFFFF, as streaming
    servers send; players read until the end of the stream)."""
    return wav_header(sample_rate)
