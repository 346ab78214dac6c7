"""OmniVoice sessions on the demo checkpoint (our own code, no reference env): streaming,
long-form, voice prompts, the reference cache, bf16, options and user errors."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import torch

from audiocpp.engine.errors import UsageError
from audiocpp.engine.records import AudioBuffer, TaskRequest, VoiceReference
from audiocpp.families.omnivoice.voice import OmniVoicePrompt
from tests.omnivoice.cases import MEDIUM_TEXT, reference_tone

FAST = {"num_inference_steps": 4}
LONG = {**FAST, "audio_chunk_threshold": 3.0, "audio_chunk_duration": 2.0}


@pytest.fixture(scope="module")
def ref_wav(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("omnivoice-ref") / "ref.wav"
    sf.write(path, reference_tone(), 24000, subtype="FLOAT")
    return str(path)


def clone_request(ref_wav: str, **options) -> TaskRequest:
    return TaskRequest(text="This is a test.", voice=VoiceReference(path=ref_wav),
                       reference_text="Hello world", options={**FAST, "seed": 9, **options})


def test_streaming_yields_one_event_per_chunk_then_the_joined_pieces(demo_model):
    request = TaskRequest(text=MEDIUM_TEXT, options={**LONG, "seed": 1})
    events = list(demo_model.session("tts", "streaming").stream(request))
    final = events[-1]
    chunks = final.result.details["chunk_texts"]
    assert len(chunks) > 1
    assert [e.kind for e in events] == ["audio"] * len(chunks) + ["final"]
    assert all(e.audio.sample_rate == 24000 and e.audio.num_samples > 0 for e in events[:-1])
    # one length whatever the output: the final audio is the pieces as streamed, joined
    streamed = np.concatenate([e.audio.samples for e in events[:-1]])
    assert np.array_equal(streamed, final.audio.samples)
    assert np.array_equal(np.concatenate([c.samples for c in final.result.chunks]), streamed)
    # offline's merge (upstream's) differs only by each piece's own volume normalization
    offline = demo_model.session("tts").run(request)
    assert offline.audio.num_samples == final.audio.num_samples
    a, b = offline.audio.samples.astype(np.float64), streamed.astype(np.float64)
    assert a @ b / np.linalg.norm(a) / np.linalg.norm(b) > 0.95
    assert len(offline.chunks) == len(chunks)
    assert final.result.metrics.num_chunks == len(chunks)


def test_short_text_streams_one_event_equal_to_the_final_audio(demo_model):
    events = list(demo_model.session("tts", "streaming").stream(TaskRequest(text="Hi there.", options=FAST)))
    assert [e.kind for e in events] == ["audio", "final"]
    assert np.array_equal(events[0].audio.samples, events[1].audio.samples)


def test_chunking_can_be_disabled(demo_model):
    result = demo_model.session("tts").run(TaskRequest(text=MEDIUM_TEXT,
                                                       options={**LONG, "audio_chunk_duration": 0}))
    assert len(result.details["chunk_texts"]) == 1 and result.chunks == []


def test_saved_voice_prompt_reproduces_the_clone_exactly(demo_model, ref_wav, tmp_path):
    session = demo_model.session("clone")
    first = session.run(clone_request(ref_wav))  # default sampling (position temperature 5)
    assert isinstance(first.voice_prompt, OmniVoicePrompt)
    path = tmp_path / "voice.pt"
    first.voice_prompt.save(path)
    again = session.run(TaskRequest(text="This is a test.", voice_prompt=path, options={**FAST, "seed": 9}))
    assert np.array_equal(first.audio.samples, again.audio.samples)
    assert all(np.array_equal(a, b) for a, b in zip(first.details["tokens"], again.details["tokens"]))
    loaded = demo_model.load_voice_prompt(path)
    assert torch.equal(loaded.ref_audio_tokens, first.voice_prompt.ref_audio_tokens)
    assert loaded.ref_text == "Hello world." and loaded.ref_rms == pytest.approx(first.voice_prompt.ref_rms)


def test_reference_encodes_are_cached_by_content(demo_model, ref_wav, monkeypatch):
    session = demo_model.session("clone")
    first = session.run(clone_request(ref_wav, seed=21))
    calls = []
    original = demo_model.codec.encode
    monkeypatch.setattr(demo_model.codec, "encode", lambda wav: calls.append(1) or original(wav))
    second = session.run(clone_request(ref_wav, seed=21))
    assert calls == []  # served from the cache, and the seeded output is unchanged
    assert np.array_equal(first.audio.samples, second.audio.samples)
    samples, sr = sf.read(ref_wav, dtype="float32")
    third = session.run(TaskRequest(text="This is a test.",
                                    voice=VoiceReference(audio=AudioBuffer(samples, sr)),
                                    reference_text="Hello world", options={**FAST, "seed": 21}))
    assert calls == [] and np.array_equal(first.audio.samples, third.audio.samples)


def test_a_reference_needs_the_clone_task(demo_model, ref_wav):
    # one rule in every family (issue 11): a reference given to tts is an error, not a silent clone
    with pytest.raises(UsageError, match="task 'tts' takes no reference audio"):
        demo_model.session("tts").run(clone_request(ref_wav))
    assert demo_model.session("clone").run(clone_request(ref_wav)).voice_prompt is not None


def test_duration_sets_the_length(demo_model):
    result = demo_model.session("tts").run(TaskRequest(
        text="Hello.", options={**FAST, "duration": 1.2, "postprocess_output": False}))
    assert result.details["target_lens"] == [30]
    assert result.audio.num_samples == 30 * 960 + 2 * 2400


def test_same_seed_same_audio_other_seed_other_audio(demo_model):
    run = lambda seed: demo_model.session("tts").run(  # noqa: E731
        TaskRequest(text="Hello.", options={**FAST, "seed": seed}))
    a, b, c = run(1), run(1), run(2)
    assert np.array_equal(a.audio.samples, b.audio.samples)
    assert not np.array_equal(a.details["tokens"][0], c.details["tokens"][0])
    assert a.metrics.seed == 1


def test_bfloat16_session_runs_close_to_float32(demo_model):
    request = TaskRequest(text="Nice to meet you.", options={**FAST, "seed": 3, "position_temperature": 0.0})
    f32 = demo_model.session("tts").run(request)
    bf16 = demo_model.session("tts", compute_dtype="bfloat16").run(request)
    assert demo_model.lm_for(torch.bfloat16).audio_heads.weight.dtype == torch.bfloat16
    assert demo_model.lm.audio_heads.weight.dtype == torch.float32  # the fp32 model is untouched
    assert np.isfinite(bf16.audio.samples).all() and bf16.audio.num_samples > 0
    assert bf16.details["target_lens"] == f32.details["target_lens"]


@pytest.mark.parametrize(("task", "kwargs", "match"), [
    ("clone", {"voice": "REF"}, "needs --reference-text"),
    ("clone", {}, "needs a reference voice"),
    ("design", {}, "needs --instruct"),
    ("design", {"instruct": "female, robot"}, "unsupported voice-design item"),
    ("tts", {"instruct": "male, female"}, "conflicting"),
    ("tts", {"language": "Klingonish"}, "unknown language"),
    ("clone", {"voice": "REF", "reference_text": "x", "voice_prompt": "PROMPT"}, "not both"),
])
def test_user_errors(demo_model, ref_wav, tmp_path, task, kwargs, match):
    if kwargs.get("voice") == "REF":
        kwargs["voice"] = VoiceReference(path=ref_wav)
    if kwargs.get("voice_prompt") == "PROMPT":
        prompt = OmniVoicePrompt(torch.zeros(8, 5, dtype=torch.long), "hi.", 0.05)
        prompt.save(tmp_path / "p.pt")
        kwargs["voice_prompt"] = tmp_path / "p.pt"
    with pytest.raises(UsageError, match=match):
        demo_model.session(task).run(TaskRequest(text="Hello.", options=FAST, **kwargs))


def test_bad_voice_prompt_file(demo_model, tmp_path):
    bad = tmp_path / "bad.pt"
    torch.save({"format_version": 1, "ref_audio_tokens": torch.zeros(3, 4), "ref_text": "x", "ref_rms": 0.1},
               bad)
    with pytest.raises(UsageError, match="not an OmniVoice voice prompt"):
        demo_model.load_voice_prompt(bad)
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a torch file")
    with pytest.raises(UsageError, match="cannot read it"):
        demo_model.load_voice_prompt(junk)


def test_demo_checkpoint_is_deterministic(tmp_path):
    from audiocpp.families.omnivoice.demo import write_demo

    write_demo(tmp_path / "a")
    write_demo(tmp_path / "b")
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert len(files) == 8
    for rel in files:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel
