"""VoxCPM1 session behaviour beyond upstream parity: the v1 request mapping (prompt-continuation
cloning only, no design), long-text chunking, reference audio at other rates, the reference cache."""

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

from .cases import PROMPT_TEXT

LONG = ("The first sentence is here. A second one follows, a little longer than the first. "
        "And a third sentence closes the paragraph.")
SHORT = {"max_tokens": 5, "retry_badcase": False}


def test_reference_only_cloning_is_refused(loaded, audio_files: dict[str, Path]) -> None:
    session = loaded("tiny_05b").session("clon")
    with pytest.raises(UsageError, match="--reference-text") as err:
        session.run(TaskRequest(text="Hello.", voice=VoiceReference(path=audio_files["prompt16k"]),
                                options=SHORT))
    assert "reference-only" in (err.value.hint or "")


@pytest.mark.parametrize("task,kwargs,message", [
    ("tts", {"reference_text": "hi"}, "--reference-text needs --voice-ref"),
    ("tts", {"voice": "prompt16k", "reference_text": "hi"}, "takes no reference audio"),
    ("clon", {}, "needs a reference voice"),
    ("tts", {"instruct": "a calm voice"}, "no request option 'instruct'"),
    ("tts", {"options": {"prompt_audio": "x.wav"}}, "no request option 'prompt_audio'"),
])
def test_bad_requests(task: str, kwargs: dict, message: str, loaded, audio_files: dict[str, Path]) -> None:
    if "voice" in kwargs:
        kwargs = {**kwargs, "voice": VoiceReference(path=audio_files[kwargs["voice"]])}
    options = {**SHORT, **kwargs.pop("options", {})}
    with pytest.raises(UsageError, match=message):
        loaded("tiny_05b").session(task).run(TaskRequest(text="Hello.", options=options, **kwargs))


def test_design_task_is_refused(loaded) -> None:
    with pytest.raises(UsageError, match="does not support task 'design'"):
        loaded("tiny_05b").session("design")


def test_clone_builds_the_continuation_prompt(loaded, audio_files: dict[str, Path]) -> None:
    model = loaded("tiny_15")
    result = model.session("clon").run(TaskRequest(text="Hello.",
                                                   voice=VoiceReference(path=audio_files["prompt44k"]),
                                                   reference_text=PROMPT_TEXT, seed=1, options=SHORT))
    assert result.details["mode"] == "continuation"
    tokens = result.details["text_tokens"][0]
    text_ids = model.parts.tokenizer(PROMPT_TEXT + "Hello.") + [101]
    assert tokens[: len(text_ids)] == text_ids
    assert tokens[len(text_ids):] == [0, 0]  # 10000 samples, left-padded to 2 patches of 7056


def test_long_text_is_chunked_and_generated_in_order(loaded) -> None:
    session = loaded("tiny_05b").session("tts")
    result = session.run(TaskRequest(text=LONG, seed=11, options={**SHORT, "text_chunk_size": 40}))
    chunks = chunk_text(LONG, 40)
    assert len(chunks) > 1 and len(result.chunks) == len(chunks) == result.metrics.num_chunks
    assert np.array_equal(result.audio.samples, np.concatenate([c.samples for c in result.chunks]))
    rng = torch.Generator().manual_seed(11)
    opts = session._decode_options(session.prepare(TaskRequest(text=LONG, options=SHORT)))
    for i, chunk in enumerate(chunks):
        audio, run, _ = run_now(session.generator.generate(session.builder.build(chunk), opts, rng))
        assert np.array_equal(run.generated.numpy(), result.details["latents"][i])
        assert np.array_equal(audio.numpy(), result.chunks[i].samples)


def test_a_leading_parenthesis_is_plain_text(loaded) -> None:
    """VoxCPM1 has no voice design: "(...)" is not moved onto every chunk."""
    model = loaded("tiny_05b")
    text = "(aside) " + LONG
    result = model.session("tts").run(TaskRequest(text=text, seed=1,
                                                  options={**SHORT, "text_chunk_size": 40}))
    first = model.parts.tokenizer("(aside)")
    tokens = result.details["text_tokens"]
    assert len(tokens) > 1 and tokens[0][: len(first)] == first
    assert all(t[: len(first)] != first for t in tokens[1:])


def test_reference_at_another_rate_is_resampled(loaded, audio_files: dict[str, Path]) -> None:
    """Stereo 22.05 kHz reference: mixed to mono and resampled to the VAE rate (44.1 kHz) with the
    engine's resampler, which is bit-identical to torchaudio's default that upstream v1 uses."""
    session = loaded("tiny_15").session("clon")
    kwargs = dict(text="Hello.", seed=4, reference_text=PROMPT_TEXT, options=SHORT)
    result = session.run(TaskRequest(voice=VoiceReference(path=audio_files["stereo22k"]), **kwargs))
    stereo = read_audio(audio_files["stereo22k"])
    mono = resample(stereo.samples, stereo.sample_rate, 44100)
    expected = session.run(TaskRequest(voice=VoiceReference(audio=AudioBuffer(mono, 44100)), **kwargs))
    assert np.array_equal(result.audio.samples, expected.audio.samples)


def test_prompt_latents_are_cached_by_content(loaded, tmp_path: Path) -> None:
    import shutil

    import soundfile as sf

    from tests.support import voice_like_signal

    session = loaded("tiny_05b").session("clon")
    first, copy = tmp_path / "unique.wav", tmp_path / "copy.wav"
    sf.write(first, voice_like_signal(123, 777, 16000), 16000, subtype="FLOAT")
    shutil.copy(first, copy)
    calls = []
    original = session._encode_now
    session._encode_now = lambda audio, padding: calls.append(padding) or original(audio, padding)
    for path in (first, copy):
        session.run(TaskRequest(text="Hello.", voice=VoiceReference(path=path), reference_text=PROMPT_TEXT,
                                seed=1, options=SHORT))
    assert calls == ["left"]  # the copy has the same content: encoded once (and only as a prompt)
