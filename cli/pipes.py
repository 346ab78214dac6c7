"""Pipes: audio to stdout (``--out -``), text from stdin as it comes, output resampling.

- ``--out -`` writes the audio to stdout and nothing else: before any work the process's file
  descriptor 1 is moved aside for the audio and pointed at stderr, so every other line (the
  ``key=value`` summary, notes, progress, anything a library prints) lands on stderr. In
  streaming mode a WAV header with unknown sizes (``0xFFFFFFFF``, what streaming writers such as
  ffmpeg and sox write) goes first, then the samples of each audio event as it is generated
  (``--format pcm16``: raw 16-bit little-endian samples, no header). In offline mode the whole
  file is encoded once, with exact sizes, in any ``--format``.
- With ``--mode streaming`` and the text on stdin, stdin is read as it arrives and each
  sentence (``--stream-by-line``: each line) is synthesized as soon as it is complete, as its own
  request with the same flags; the audio is the concatenation of theirs.
- ``--sample-rate N`` resamples what is written with the engine's resampler (streamed audio with
  :class:`engine.audio.streaming.StreamingResampler`, equal to resampling the whole).
"""

from __future__ import annotations

import codecs
import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from audiocpp.engine.audio.wav import wav_header as engine_wav_header
from audiocpp.engine.errors import AudioError, UsageError
from audiocpp.engine.records import AudioBuffer, TaskResult
from audiocpp.engine.text.stream import (
    segments,
    sentence_end,  # noqa: F401 - sentence_end: re-exported for tests
)

#: formats that stream to stdout: soundfile subtype of the samples, WAV format tag, bytes per sample
STREAM_FORMATS: dict[str, tuple[str, int, int]] = {
    "wav16": ("PCM_16", 1, 2), "wav24": ("PCM_24", 1, 3), "wav32": ("FLOAT", 3, 4), "pcm16": ("PCM_16", 0, 2),
}


def is_stdout(path: Path | str | None) -> bool:
    return path is not None and str(path) == "-"


def stdout_format(fmt: str | None, streaming: bool) -> str:
    """The format of ``--out -``: wav16 by default; pcm16 and the WAV formats stream, every
    other format only in offline mode (encoded whole)."""
    from audiocpp.engine.audio.io import available_write_formats

    if sys.stdout.isatty():
        raise UsageError("--out - writes audio to stdout, which is a terminal here",
                         hint="pipe it into a player (`... --out - | aplay`) or a file, "
                         "or pass --out FILE.wav")
    fmt = fmt or "wav16"
    if fmt in STREAM_FORMATS:
        return fmt
    formats = available_write_formats()
    if fmt not in formats:
        raise UsageError(f"--format {fmt!r} is not supported", hint=f"use one of: {', '.join(formats)}")
    if streaming:
        raise UsageError(f"--out - streams {', '.join(STREAM_FORMATS)} in streaming mode, not {fmt}",
                         hint="use --format wav16 or pcm16, or --mode offline to write the whole file "
                         "at once")
    return fmt


def check_sample_rate(rate: int | None, fmt: str) -> None:
    """``--sample-rate`` is a sane rate, and one the lossy format takes."""
    from audiocpp.engine.audio.io import CODEC_RATES
    from audiocpp.server.encoding import MAX_RATE, MIN_RATE  # one range for the CLI and the server

    if rate is None:
        return
    if not MIN_RATE <= rate <= MAX_RATE:
        raise UsageError(f"--sample-rate {rate} is out of range",
                         hint=f"use a rate between {MIN_RATE} and {MAX_RATE} Hz, e.g. 16000")
    allowed = CODEC_RATES.get(fmt)
    if allowed and rate not in allowed:
        raise UsageError(f"{fmt} does not take --sample-rate {rate}",
                         hint=f"{fmt} takes {', '.join(map(str, allowed))} Hz")


def wav_header(rate: int, fmt: str, num_samples: int | None = None) -> bytes:
    """A 44-byte mono WAV header of ``fmt``; ``num_samples=None``: unknown sizes (a stream)."""
    _, tag, width = STREAM_FORMATS[fmt]
    return engine_wav_header(rate, tag=tag, width=width, num_samples=num_samples)


def encode_samples(samples: np.ndarray, fmt: str) -> bytes:
    """Raw little-endian samples, converted by libsndfile as a file of that format would be."""
    import soundfile as sf

    buffer = io.BytesIO()
    subtype = STREAM_FORMATS[fmt][0]
    sf.write(buffer, np.asarray(samples, dtype=np.float32), 8000, format="RAW", subtype=subtype,
             endian="LITTLE")
    return buffer.getvalue()


class StdoutSink:
    """Audio bytes on the real stdout; the process's fd 1 points at stderr from now on."""

    def __init__(self) -> None:
        sys.stdout.flush()
        self._fd = os.dup(1)
        os.dup2(2, 1)

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
        except BrokenPipeError:
            raise AudioError("the reader of stdout closed the pipe before the audio ended",
                             hint="keep the reading program running until audiocpp exits") from None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class AudioOutput:
    """Where a run's audio goes: ``--out FILE`` (written atomically by :meth:`close`) or stdout
    (streamed pieces as they come in streaming mode, else the whole at :meth:`close`), at the
    model's rate or resampled to ``--sample-rate``."""

    def __init__(self, out: Path, fmt: str, *, streaming: bool, target_rate: int | None = None) -> None:
        self.out, self.fmt, self.target_rate = out, fmt, target_rate
        self.to_stdout = is_stdout(out)
        self.streams = self.to_stdout and streaming
        self.sink = StdoutSink() if self.to_stdout else None
        self._resampler = None
        self._started = False
        self.streamed_samples = 0

    @property
    def info(self):  # noqa: ANN201 - a text stream
        """Where the ``key=value`` summary goes (stderr when the audio owns stdout)."""
        return sys.stderr if self.to_stdout else sys.stdout

    def rate(self, model_rate: int) -> int:
        """``--sample-rate``, else the model's rate, else (a lossy format that does not take it,
        e.g. opus at 44.1 kHz) the next rate up that the format takes, with a note."""
        from audiocpp.engine.audio.io import CODEC_RATES

        if self.target_rate:
            return self.target_rate
        allowed = CODEC_RATES.get(self.fmt)
        if not allowed or model_rate in allowed:
            return model_rate
        rate = min((r for r in allowed if r >= model_rate), default=max(allowed))
        print(f"note: {self.fmt} takes {', '.join(map(str, allowed))} Hz; resampling the {model_rate} Hz "
              f"audio to {rate} Hz (--sample-rate chooses)", file=sys.stderr)
        return rate

    def resample(self, audio: AudioBuffer, rate: int | None = None) -> AudioBuffer:
        """``audio`` at ``rate`` (default ``--sample-rate``; whole-buffer resampling)."""
        rate = rate or self.target_rate
        if not rate or audio.sample_rate == rate:
            return audio
        from audiocpp.engine.audio.resample import resample

        return AudioBuffer(resample(audio.samples, audio.sample_rate, rate), rate)

    def piece(self, audio: AudioBuffer) -> None:
        """A streamed piece of audio: on stdout at once when streaming there."""
        if not self.streams:
            return
        assert self.sink is not None
        if not self._started:
            from audiocpp.engine.audio.streaming import StreamingResampler

            self._resampler = StreamingResampler(audio.sample_rate, self.rate(audio.sample_rate))
            if self.fmt != "pcm16":
                self.sink.write(wav_header(self.rate(audio.sample_rate), self.fmt))
            self._started = True
        assert self._resampler is not None
        samples = self._resampler.push(audio.samples)
        self._emit(samples)

    def _emit(self, samples: np.ndarray) -> None:
        if len(samples):
            assert self.sink is not None
            self.sink.write(encode_samples(samples, self.fmt))
            self.streamed_samples += len(samples)

    def close(self, audio: AudioBuffer) -> tuple[int, float]:
        """Finish: write the whole ``audio`` (file, or stdout when nothing was streamed there).
        Returns the sample rate and seconds of what was written (in streaming mode on stdout:
        the pieces as they came, e.g. without the cross-fades of a family's merged audio)."""
        if self._started:
            assert self.sink is not None and self._resampler is not None
            self._emit(self._resampler.finish())
            self.sink.close()
            rate = self._resampler.new_freq
            return rate, self.streamed_samples / rate
        final = self.resample(audio, self.rate(audio.sample_rate))
        if not self.to_stdout:
            from audiocpp.engine.audio.io import write_audio

            write_audio(self.out, final, self.fmt)
            return final.sample_rate, final.duration
        assert self.sink is not None
        if self.streams:  # a stream that produced no piece: header and the final audio
            self.sink.write(wav_header(final.sample_rate, self.fmt) if self.fmt != "pcm16" else b"")
            self._emit(final.samples)
        elif self.fmt in STREAM_FORMATS:
            header = (wav_header(final.sample_rate, self.fmt, final.num_samples) if self.fmt != "pcm16"
                      else b"")
            self.sink.write(header + encode_samples(final.samples, self.fmt))
        else:
            from audiocpp.engine.audio.io import encode_audio

            self.sink.write(encode_audio(final, self.fmt))
        self.sink.close()
        return final.sample_rate, final.duration


def merge_results(results: list[TaskResult]) -> TaskResult:
    """One result for the requests of a run: itself when one; else the audio concatenated,
    each request's audio a chunk, timings summed (first audio: the first request's)."""
    from dataclasses import replace

    if len(results) == 1:
        return results[0]
    first = results[0]
    audio = AudioBuffer(np.concatenate([r.audio.samples for r in results]), first.audio.sample_rate)
    metrics = replace(first.metrics, wall_s=sum(r.metrics.wall_s for r in results), audio_s=audio.duration,
                      peak_rss_mb=max(r.metrics.peak_rss_mb for r in results),
                      num_chunks=sum(r.metrics.num_chunks for r in results))
    return replace(first, audio=audio, chunks=[r.audio for r in results], metrics=metrics,
                   details={"segments": [r.details for r in results]})


# -- text from stdin as it comes -----------------------------------------------------------------
def stdin_is_incremental(text: str | None, text_file: Path | None, streaming: bool) -> bool:
    """Text is read from stdin as it comes: streaming mode, and the text on stdin."""
    if not streaming or text_file is not None:
        return False
    return text == "-" or (text is None and not sys.stdin.isatty())


def read_segments(fd: int | None = None, by_line: bool = False, chunk: int = 4096) -> Iterator[str]:
    """Sentences (or lines) of the UTF-8 text on ``fd`` (stdin), each as soon as it is complete."""
    fd = sys.stdin.fileno() if fd is None else fd
    decoder = codecs.getincrementaldecoder("utf-8")(errors="strict")
    buffer = ""
    while True:
        data = os.read(fd, chunk)
        try:
            buffer += decoder.decode(data, final=not data)
        except UnicodeDecodeError:
            raise UsageError("the text on stdin is not UTF-8",
                             hint="convert it, e.g. `iconv -t UTF-8`") from None
        done, buffer = segments(buffer, by_line, final=not data)
        yield from done
        if not data:
            return
