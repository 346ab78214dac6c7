"""Fuzz audio reading: mutated WAV/FLAC/OGG/MP3 seeds, WAV headers drawn field by field, and
FLAC STREAMINFO blocks that claim any length, rate and channel count.

``read_audio`` (mono, what references go through) and ``read_audio_channels`` are called;
a header that claims more samples than may be decoded is refused before anything is allocated
(the memory cap of the harness turns an allocation sized by the header into a failure).
"""

from __future__ import annotations

import struct
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from audiocpp.engine.audio.io import read_audio, read_audio_channels

from . import seeds
from .harness import check, fuzz_settings
from .mutate import INTERESTING, mutated


def read_both(path: Path) -> None:
    read_audio(path)
    read_audio_channels(path)


@st.composite
def wav_files(draw: st.DrawFn) -> bytes:
    """A RIFF/WAVE file: fmt fields and chunk sizes drawn, each possibly a lie."""
    def lie(truth: st.SearchStrategy, lies: st.SearchStrategy) -> object:
        return draw(st.one_of(truth, truth, truth, truth, lies))

    tag = lie(st.sampled_from([1, 3, 0xFFFE]), st.sampled_from([0, 2, 0x55, 65535]))
    channels = lie(st.integers(1, 2), st.sampled_from([0, 3, 8, 255, 256, 1024, 65535]))
    rate = lie(st.sampled_from([8000, 16000, 44100]), st.sampled_from(INTERESTING))
    bits = lie(st.just(32) if tag == 3 else st.sampled_from([8, 16, 24, 32]),
               st.sampled_from([0, 1, 12, 64, 65535]))
    align = lie(st.just(channels * bits // 8), st.sampled_from([0, 1, 3, 65535]))
    byte_rate = rate * align
    fmt = struct.pack("<HHIIHH", tag, channels, rate % 2**32, byte_rate % 2**32, align % 2**16, bits)
    if tag == 0xFFFE:
        fmt += (struct.pack("<HHI", 22, bits, 3)
                + b"\x01\x00\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71")
    body = draw(st.binary(max_size=256))
    data_size = lie(st.just(len(body)), st.sampled_from(INTERESTING))
    fmt_size = lie(st.just(len(fmt)), st.sampled_from(INTERESTING))
    chunks = b"fmt " + struct.pack("<I", fmt_size % 2**32) + fmt
    if draw(st.booleans()):  # an extra chunk before the data
        extra = draw(st.binary(max_size=16))
        chunks += b"LIST" + struct.pack("<I", draw(st.one_of(st.just(len(extra)),
                                                             st.sampled_from(INTERESTING))) % 2**32) \
            + extra
    chunks += b"data" + struct.pack("<I", data_size % 2**32) + body
    riff = lie(st.just(len(chunks) + 4), st.sampled_from(INTERESTING))
    return b"RIFF" + struct.pack("<I", riff % 2**32) + b"WAVE" + chunks


@st.composite
def flac_files(draw: st.DrawFn) -> bytes:
    """The FLAC seed with its STREAMINFO rewritten: rate, channels, bits, total samples."""
    data = bytearray(seeds.audio_seeds()["flac"])
    assert data[:4] == b"fLaC"
    info = 8  # after "fLaC" and the block header
    rate = draw(st.one_of(st.just(16000), st.just(16000), st.integers(0, 2**20 - 1)))
    channels = draw(st.one_of(st.just(2), st.just(2), st.just(2), st.integers(1, 8)))
    bits = draw(st.one_of(st.just(16), st.just(16), st.just(16), st.integers(4, 32)))
    total = draw(st.one_of(st.just(600), st.integers(0, 2**36 - 1),
                           st.sampled_from([0, 2**36 - 1, 2**32, 2**30])))
    packed = (rate << 44) | ((channels - 1) << 41) | ((bits - 1) << 36) | total
    data[info + 10:info + 18] = packed.to_bytes(8, "big")
    return bytes(data)


@given(mutated(seeds.audio_seeds(), max_edits=4, focus=128))
@fuzz_settings("audio_bytes")
def test_mutated_audio(fuzz_dir: Path, case: tuple[str, bytes]) -> None:
    path = fuzz_dir / f"ref.{'wav' if case[0].startswith('wav') else case[0]}"
    path.write_bytes(case[1])
    check("audio_bytes", lambda: read_both(path), files=[path])


@given(st.one_of(wav_files(), flac_files()))
@fuzz_settings("audio_header")
def test_lying_audio_headers(fuzz_dir: Path, data: bytes) -> None:
    path = fuzz_dir / ("ref.flac" if data.startswith(b"fLaC") else "ref.wav")
    path.write_bytes(data)
    check("audio_header", lambda: read_both(path), files=[path])
