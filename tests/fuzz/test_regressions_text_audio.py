"""What the fuzzers found in audio reading, text chunking and GGUF tokenizers, kept as exact inputs."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from audiocpp.engine.errors import AudioError, ModelError
from audiocpp.engine.text import chunk_text, split_sentences

from . import seeds
from .harness import check
from .test_fuzz_audio import read_both


def _flac_claiming(total: int, channels: int = 2) -> bytes:
    data = bytearray(seeds.audio_seeds()["flac"])
    packed = (16000 << 44) | ((channels - 1) << 41) | (15 << 36) | total
    data[18:26] = packed.to_bytes(8, "big")
    return bytes(data)


def test_a_flac_header_claiming_hours_is_refused_before_allocating(tmp_path: Path) -> None:
    """STREAMINFO said 2^32 + 600 frames of 2 channels: soundfile allocated 32 GiB up front
    (MemoryError under the fuzz harness's memory cap) before decoding 600 frames."""
    path = tmp_path / "liar.flac"
    path.write_bytes(_flac_claiming(2**32 + 600))
    outcome = check("regression", lambda: read_both(path), files=[path])
    assert isinstance(outcome, AudioError) and "claims 4294967896 frames" in outcome.message


def test_an_honest_short_flac_still_reads(tmp_path: Path) -> None:
    from audiocpp.engine.audio.io import read_audio, read_audio_channels

    path = tmp_path / "ok.flac"
    path.write_bytes(_flac_claiming(600))
    read_both(path)  # and what it reads is the 600 stereo frames at 16 kHz the header says
    mono, (channels, rate) = read_audio(path), read_audio_channels(path)
    assert (mono.sample_rate, mono.num_samples) == (16000, 600) and np.isfinite(mono.samples).all()
    assert rate == 16000 and channels.shape == (2, 600)


def test_max_seconds_refuses_from_the_header(tmp_path: Path) -> None:
    """Uploads can refuse a long file before decoding it (the header claims 600 frames at 16 kHz)."""
    from audiocpp.engine.audio.io import read_audio

    path = tmp_path / "ok.flac"
    path.write_bytes(_flac_claiming(600))
    with pytest.raises(AudioError, match="at most 0.01 s"):
        read_audio(path, max_seconds=0.01)
    assert read_audio(path, max_seconds=1).sample_rate == 16000


def test_dotted_cjk_text_is_chunked_in_linear_time() -> None:
    """"字." repeated: each "." searched back to the start of the space-less text for its word
    (200 000 characters took 10 s, a megabyte minutes); the look-back is now bounded."""
    text = "字." * 200_000
    start = time.perf_counter()
    sentences = split_sentences(text)
    chunk_text(text, 80)
    assert time.perf_counter() - start < 10
    assert len(sentences) == 200_000


def test_a_long_dotted_word_is_still_one_abbreviation() -> None:
    """The bounded look-back gives the same answer for a dotted run longer than its window."""
    run = "a." * 40
    assert split_sentences(f"{run} next") == [f"{run} next"]
    assert split_sentences(f"xx{run} next") == [f"xx{run}", "next"]
    assert split_sentences("(" * 100 + "Mr. Smith") == ["(" * 100 + "Mr. Smith"]


@pytest.mark.parametrize("key, value", [
    ("tokenizer.ggml.token_type", ["", 1]),  # int('') was a ValueError
    ("tokenizer.ggml.token_type", True),  # iterating a bool: TypeError
    ("tokenizer.ggml.bos_token_id", np.array([1, 2], dtype=np.int32)),  # int(array): TypeError
    ("tokenizer.ggml.add_bos_token", np.array([], dtype=np.int32)),  # truth of an empty array: ValueError
    ("tokenizer.ggml.model", np.array([], dtype=np.int32)),  # array != "gpt2": ValueError
])
def test_lying_tokenizer_keys_are_model_errors(key: str, value: object) -> None:
    from audiocpp.engine.tokenizer import tokenizer_from_gguf

    from .test_fuzz_text import gguf_keys

    keys = {**gguf_keys("llama_bpe"), key: value, "tokenizer.ggml.bos_token_id": 1,
            "tokenizer.ggml.add_bos_token": True} | {key: value}
    with pytest.raises(ModelError):
        tokenizer_from_gguf(keys, "llama_bpe")
