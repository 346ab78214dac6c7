"""VoxCPM2 session behaviour beyond upstream parity: long-text chunking, voice-design prefixes
per chunk, retry semantics, reference audio at other rates, the reference cache, limits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from audiocpp.engine.audio.io import read_audio
from audiocpp.engine.audio.resample import resample
from audiocpp.engine.batching.ops import run_now
from audiocpp.engine.errors import UsageError
from audiocpp.engine.records import AudioBuffer, TaskRequest, VoiceReference
from audiocpp.engine.text.chunking import chunk_text
from audiocpp.families.voxcpm2.prompt_layout import encode_prompt_audio

LONG = ("The first sentence is here. A second one follows, a little longer than the first. "
        "And a third sentence closes the paragraph.")
SHORT = {"max_tokens": 5, "retry_badcase": False}


def test_long_text_is_chunked_and_generated_in_order(loaded) -> None:
    model = loaded("tiny")
    session = model.session("tts")
    result = session.run(TaskRequest(text=LONG, seed=11, options={**SHORT, "text_chunk_size": 40}))
    chunks = chunk_text(LONG, 40)
    assert len(chunks) > 1 and len(result.chunks) == len(chunks) == result.metrics.num_chunks
    assert np.array_equal(result.audio.samples, np.concatenate([c.samples for c in result.chunks]))
    # The same as generating the chunks one after the other from one seeded random stream.
    gen = session.generator
    rng = torch.Generator().manual_seed(11)
    opts = session._decode_options(session.prepare(TaskRequest(text=LONG, options=SHORT)))
    for i, chunk in enumerate(chunks):
        audio, run, _ = run_now(gen.generate(session.builder.build(chunk), opts, rng))
        assert np.array_equal(run.generated.numpy(), result.details["latents"][i])
        assert np.array_equal(audio.numpy(), result.chunks[i].samples)


def test_design_description_is_repeated_on_every_chunk(loaded) -> None:
    session = loaded("tiny").session("design")
    tokenizer = loaded("tiny").parts.tokenizer
    prefix = tokenizer("(a calm voice)")
    for request in (TaskRequest(text="(a calm voice)" + LONG, seed=1,
                                options={**SHORT, "text_chunk_size": 40}),
                    TaskRequest(text=LONG, instruct="a calm voice", seed=1,
                                options={**SHORT, "text_chunk_size": 40})):
        result = session.run(request)
        assert len(result.details["text_tokens"]) > 1
        for tokens in result.details["text_tokens"]:
            assert tokens[: len(prefix)] == prefix


def test_retry_attempts_follow_upstream(loaded) -> None:
    session = loaded("tiny").session("tts")
    bad = {"max_tokens": 12, "min_tokens": 20, "retry_badcase_ratio_threshold": 0.5}
    for times, attempts in ((3, 3), (1, 1), (0, 1)):
        result = session.run(TaskRequest(text="Hello.", seed=3,
                                         options={**bad, "retry_badcase_max_times": times}))
        assert result.details["attempts"] == [attempts]
    streaming = loaded("tiny").session("tts", "streaming")
    assert streaming.run(TaskRequest(text="Hello.", seed=3, options=bad)).details["attempts"] == [1]


def test_length_cap_applies_without_retry(loaded) -> None:
    session = loaded("tiny").session("tts")
    result = session.run(TaskRequest(text="Hi", seed=2, options={"min_tokens": 1000, "max_tokens": 1000,
                                                                 "retry_badcase": False}))
    target = len(loaded("tiny").parts.tokenizer("Hi"))
    assert result.details["num_patches"] == [int(target * 6.0 + 10)]


def test_reference_at_another_rate_is_resampled_to_16k(loaded, audio_files: dict[str, Path]) -> None:
    model = loaded("tiny")
    session = model.session("clon")
    result = session.run(TaskRequest(text="Hello.", seed=4,
                                     voice=VoiceReference(path=audio_files["stereo44k"]), options=SHORT))
    stereo = read_audio(audio_files["stereo44k"])
    mono16 = resample(stereo.samples, stereo.sample_rate, 16000)
    expected = session.run(TaskRequest(text="Hello.", seed=4,
                                       voice=VoiceReference(audio=AudioBuffer(mono16, 16000)),
                                       options=SHORT))
    assert np.array_equal(result.audio.samples, expected.audio.samples)


def test_reference_latents_are_cached_by_content(loaded, audio_files: dict[str, Path]) -> None:
    model = loaded("tiny")
    session = model.session("clon")
    request = TaskRequest(text="Hello.", seed=4, voice=VoiceReference(path=audio_files["ref"]), options=SHORT)
    session.run(request)
    misses = model.reference_cache.misses
    again = session.run(request)
    assert model.reference_cache.misses == misses
    assert again.details["mode"] == "reference"


def test_prompt_padding_is_left_and_reference_padding_right(loaded, audio_files: dict[str, Path]) -> None:
    vae = loaded("tiny").parts.codec
    audio = torch.from_numpy(read_audio(audio_files["prompt"]).samples)
    patch_len = 4 * vae.chunk_size
    pad = patch_len - len(audio) % patch_len
    left = encode_prompt_audio(vae, audio, 4, "left")
    right = encode_prompt_audio(vae, audio, 4, "right")
    assert left.shape == right.shape == ((len(audio) + pad) // patch_len, 4, vae.latent_dim)
    padded = torch.nn.functional.pad(audio, (pad, 0)).reshape(1, -1)
    assert torch.equal(left, vae.encode(padded).reshape(vae.latent_dim, -1, 4).permute(1, 2, 0))


def test_prompt_longer_than_the_context_is_a_usage_error(loaded) -> None:
    session = loaded("tiny").session("tts")
    with pytest.raises(UsageError, match="max_length"):
        session.run(TaskRequest(text="word " * 600, seed=1, options={"retry_badcase": False}))


def test_seeded_runs_repeat_and_seeds_differ(loaded) -> None:
    session = loaded("tiny").session("tts")
    a = session.run(TaskRequest(text="Hello.", seed=5, options=SHORT)).audio.samples
    b = session.run(TaskRequest(text="Hello.", seed=5, options=SHORT)).audio.samples
    c = session.run(TaskRequest(text="Hello.", seed=6, options=SHORT)).audio.samples
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_generation_that_outgrows_the_context_is_a_usage_error(loaded) -> None:
    """A prompt that fits but leaves no room for the patches (tiny max_length 512), as upstream's
    "KV cache is full" -- raised when the sequence actually reaches the limit."""
    session = loaded("tiny").session("tts")
    text = "word " * 230  # ~460 prompt positions; the cap allows far more patches than fit
    with pytest.raises(UsageError, match="generated patches reached the model's max_length"):
        session.run(TaskRequest(text=text, seed=1, options={"min_tokens": 100, "max_tokens": 100,
                                                            "retry_badcase": False}))


def test_a_continuation_prompt_over_the_reference_cap_is_refused(loaded, tmp_path: Path) -> None:
    """prompt_audio comes with its transcript: over max_reference_seconds it is refused (a cut would
    no longer match the transcript), as --voice-ref with --reference-text is."""
    import soundfile as sf

    model = loaded("tiny")
    path = tmp_path / "long.wav"
    sf.write(path, (0.1 * np.sin(np.arange(16000 * 6) / 7)).astype(np.float32), 16000)
    options = {**SHORT, "prompt_audio": str(path), "prompt_text": "what is said", "max_reference_seconds": 5}
    with pytest.raises(UsageError, match="6.0 s long, over the 5 s cap") as info:
        model.session("clone").run(TaskRequest(text="Hi.", seed=1, options=options))
    assert "max_reference_seconds" in (info.value.hint or "")
