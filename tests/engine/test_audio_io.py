"""engine.audio.io: round trips for every format, upstream's mono mixdown, clear errors,
atomic writes that leave nothing behind on failure."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from audiocpp.engine.audio import io as audio_io
from audiocpp.engine.audio.io import WRITE_FORMATS, read_audio, read_audio_channels, write_audio
from audiocpp.engine.errors import AudiocppError, AudioError
from audiocpp.engine.records import AudioBuffer


def _sine(n: int = 4800, sr: int = 24000, amp: float = 0.5) -> AudioBuffer:
    t = np.arange(n) / sr
    return AudioBuffer((amp * np.sin(2 * np.pi * 440 * t)).astype(np.float32), sr)


def _noise(n: int = 4000, sr: int = 16000, seed: int = 0) -> AudioBuffer:
    rng = np.random.default_rng(seed)
    return AudioBuffer(np.clip(rng.normal(0, 0.25, n), -1, 1).astype(np.float32), sr)


# --------------------------------------------------------------------------- round trips

@pytest.mark.parametrize(("fmt", "subtype", "tolerance"), [
    ("wav16", "PCM_16", 1 / 32767), ("wav24", "PCM_24", 1 / 8388607), ("wav32", "FLOAT", 0.0),
    ("flac", "PCM_16", 1 / 32767),
])
def test_lossless_round_trip(tmp_path: Path, fmt: str, subtype: str, tolerance: float) -> None:
    audio = _noise()
    path = tmp_path / f"out.{fmt}"
    write_audio(path, audio, fmt)
    info = sf.info(str(path))
    assert (info.format, info.subtype) == (WRITE_FORMATS[fmt][0], subtype)
    back = read_audio(path)
    assert back.sample_rate == audio.sample_rate and back.num_samples == audio.num_samples
    assert back.samples.dtype == np.float32
    assert float(np.abs(back.samples - audio.samples).max()) <= tolerance


def test_ogg_round_trip_is_close(tmp_path: Path) -> None:
    audio = _sine(24000)
    path = tmp_path / "out.ogg"
    write_audio(path, audio, "ogg")
    assert sf.info(str(path)).subtype == "VORBIS"
    back = read_audio(path)
    assert back.sample_rate == 24000 and back.num_samples == audio.num_samples
    corr = np.corrcoef(back.samples, audio.samples)[0, 1]
    assert corr > 0.999


def test_integer_formats_clip_and_float_keeps(tmp_path: Path) -> None:
    audio = AudioBuffer(np.array([0.0, 1.5, -2.0, 0.5], np.float32), 8000)
    write_audio(tmp_path / "a.wav", audio, "wav16")
    assert sf.read(str(tmp_path / "a.wav"), dtype="int16")[0].tolist() == [0, 32767, -32768, 16384]
    write_audio(tmp_path / "b.wav", audio, "wav32")
    assert np.array_equal(read_audio(tmp_path / "b.wav").samples, audio.samples)


@pytest.mark.parametrize("subtype", ["PCM_U8", "PCM_16", "PCM_24", "PCM_32", "FLOAT", "DOUBLE"])
def test_reads_wav_subtypes_like_soundfile(tmp_path: Path, subtype: str) -> None:
    data = _noise(3000, 22050).samples
    path = tmp_path / "in.wav"
    sf.write(str(path), data, 22050, subtype=subtype)
    expected, _ = sf.read(str(path), dtype="float32")
    got = read_audio(path)
    assert got.sample_rate == 22050
    assert np.array_equal(got.samples, expected)


@pytest.mark.parametrize(("ext", "subtype"), [("flac", "PCM_24"), ("ogg", "VORBIS")])
def test_reads_flac_and_ogg(tmp_path: Path, ext: str, subtype: str) -> None:
    data = _sine(8000, 16000).samples
    path = tmp_path / f"in.{ext}"
    sf.write(str(path), data, 16000, subtype=subtype)
    expected, _ = sf.read(str(path), dtype="float32")
    assert np.array_equal(read_audio(path).samples, expected)


def test_reads_mp3_when_libsndfile_can(tmp_path: Path) -> None:
    if "MP3" not in sf.available_formats():
        pytest.skip("this libsndfile has no MPEG support")
    path = tmp_path / "in.mp3"
    sf.write(str(path), _sine(16000, 16000).samples, 16000, format="MP3", subtype="MPEG_LAYER_III")
    expected, _ = sf.read(str(path), dtype="float32")
    got = read_audio(path)
    assert got.sample_rate == 16000 and np.array_equal(got.samples, expected)


def test_stereo_mixdown_is_the_channel_mean(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    frames = (rng.normal(0, 0.2, (5000, 3))).astype(np.float32)
    path = tmp_path / "multi.wav"
    sf.write(str(path), frames, 48000, subtype="FLOAT")
    channels, sr = read_audio_channels(path)
    assert sr == 48000 and channels.shape == (3, 5000) and channels.dtype == np.float32
    assert channels.flags.c_contiguous
    assert np.array_equal(channels, frames.T)
    mono = read_audio(path)
    assert np.array_equal(mono.samples, np.mean(frames.T, axis=0))


def test_write_keeps_rate_and_mode(tmp_path: Path) -> None:
    path = tmp_path / "out.wav"
    write_audio(path, _sine(100, 44100), "wav16")
    assert sf.info(str(path)).samplerate == 44100
    umask = os.umask(0)
    os.umask(umask)
    assert (path.stat().st_mode & 0o777) == (0o666 & ~umask)


def test_write_replaces_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "out.wav"
    path.write_bytes(b"old")
    write_audio(path, _sine(100), "wav16")
    assert read_audio(path).num_samples == 100
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.wav"]


# --------------------------------------------------------------------------- read errors

def _assert_audio_error(path: Path, *needles: str) -> AudioError:
    with pytest.raises(AudioError) as info:
        read_audio(path)
    error = info.value
    assert isinstance(error, AudiocppError) and error.hint
    assert str(path) in error.message
    for needle in needles:
        assert needle in error.message
    assert error.__cause__ is None or not isinstance(error.__cause__, sf.LibsndfileError)
    return error


def test_missing_file(tmp_path: Path) -> None:
    _assert_audio_error(tmp_path / "nope.wav", "does not exist")


def test_folder_is_not_audio(tmp_path: Path) -> None:
    _assert_audio_error(tmp_path, "folder")


@pytest.mark.parametrize("content", [b"", b"hello, this is text\n" * 10, b"RIFF\x00\x00"])
def test_not_audio(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "fake.wav"
    path.write_bytes(content)
    _assert_audio_error(path, "cannot decode")


def _wav_bytes(tmp_path: Path, n: int = 1000) -> bytes:
    path = tmp_path / "full.wav"
    sf.write(str(path), _noise(n, 8000).samples, 8000, subtype="PCM_16")
    return path.read_bytes()


def test_truncated_wav_data(tmp_path: Path) -> None:
    data = _wav_bytes(tmp_path)
    path = tmp_path / "cut.wav"
    path.write_bytes(data[: len(data) // 2])
    _assert_audio_error(path, "truncated")


def test_truncated_wav_header(tmp_path: Path) -> None:
    data = _wav_bytes(tmp_path)
    path = tmp_path / "cut.wav"
    path.write_bytes(data[:30])
    _assert_audio_error(path, "cannot decode")


def test_streaming_placeholder_size_is_not_truncation(tmp_path: Path) -> None:
    data = bytearray(_wav_bytes(tmp_path))
    at = data.find(b"data")
    data[at + 4:at + 8] = struct.pack("<I", 0xFFFFFFFF)
    path = tmp_path / "stream.wav"
    path.write_bytes(bytes(data))
    assert read_audio(path).num_samples == 1000


def test_truncated_flac(tmp_path: Path) -> None:
    full = tmp_path / "full.flac"
    sf.write(str(full), _noise(40000, 16000).samples, 16000)
    path = tmp_path / "cut.flac"
    path.write_bytes(full.read_bytes()[: full.stat().st_size // 2])
    _assert_audio_error(path)


def test_empty_audio_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.wav"
    sf.write(str(path), np.zeros(0, np.float32), 8000)
    _assert_audio_error(path, "no samples")


# --------------------------------------------------------------------------- write errors

def _no_leftovers(folder: Path, *keep: str) -> None:
    assert sorted(p.name for p in folder.iterdir()) == sorted(keep)


def test_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(AudioError, match="not supported"):
        write_audio(tmp_path / "x.m4a", _sine(10), "m4a")  # mp3 is written where libsndfile can (issue 14)
    _no_leftovers(tmp_path)


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(AudioError, match="does not exist") as info:
        write_audio(tmp_path / "no" / "x.wav", _sine(10), "wav16")
    assert info.value.hint


def test_parent_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(AudioError):
        write_audio(tmp_path / "file" / "x.wav", _sine(10), "wav16")
    _no_leftovers(tmp_path, "file")


def test_destination_is_a_folder(tmp_path: Path) -> None:
    (tmp_path / "out.wav").mkdir()
    with pytest.raises(AudioError, match="folder"):
        write_audio(tmp_path / "out.wav", _sine(10), "wav16")
    _no_leftovers(tmp_path, "out.wav")


def test_non_finite_audio_is_refused(tmp_path: Path) -> None:
    audio = AudioBuffer(np.array([0.0, np.nan], np.float32), 8000)
    with pytest.raises(AudioError, match="NaN"):
        write_audio(tmp_path / "x.wav", audio, "wav16")
    _no_leftovers(tmp_path)


@pytest.mark.parametrize("exc", [RuntimeError("libsndfile failed"), OSError(28, "No space left on device")])
def test_failed_write_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exc: Exception) -> None:
    path = tmp_path / "out.wav"
    path.write_bytes(b"previous")

    def broken_write(handle, data, samplerate, **kwargs):
        handle.write(b"RIFF partial")
        raise exc

    monkeypatch.setattr(sf, "write", broken_write)
    with pytest.raises(AudioError) as info:
        write_audio(path, _sine(10), "wav16")
    assert info.value.hint
    assert path.read_bytes() == b"previous"
    _no_leftovers(tmp_path, "out.wav")


def test_interrupted_write_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(handle, data, samplerate, **kwargs):
        handle.write(b"RIFF partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(sf, "write", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_audio(tmp_path / "out.wav", _sine(10), "wav16")
    _no_leftovers(tmp_path)


def test_failed_rename_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_rename(src, dst):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(audio_io.os, "replace", no_rename)
    with pytest.raises(AudioError, match="Permission denied"):
        write_audio(tmp_path / "out.flac", _sine(10), "flac")
    _no_leftovers(tmp_path)
