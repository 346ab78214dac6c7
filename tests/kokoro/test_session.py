"""Kokoro's request mapping on a tiny random checkpoint: voices and mixes, the default voice, speed,
word timings, streaming pieces, symbols outside the vocabulary, refused tasks and bad input."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import audiocpp.engine as ac
from audiocpp.engine.errors import AudiocppWarning, UsageError

from .cases import HELLO, JAPANESE, LONGER


@pytest.fixture(scope="module")
def model(tiny_ckpt):
    return ac.load(tiny_ckpt)


def run(model, text: str, mode: str = "offline", **options) -> ac.TaskResult:
    request = ac.TaskRequest(text=text, seed=3, options={"phonemes": True, **options})
    return model.session("tts", mode=mode).run(request)


def test_voices_are_listed_with_languages(model) -> None:
    assert [v["name"] for v in model.named_voices()] == ["af_test", "jf_test"]
    assert model.named_voices()[1]["language"] == "ja"
    assert model.default_voice("en-us") == "af_test"
    assert model.default_voice("ja") == "jf_test"


def test_mix_is_the_weighted_mean_of_the_packs(model) -> None:
    name, pack = model.voices.resolve("af_test(3) + jf_test(1)")
    expected = 0.75 * model.voices.pack("af_test") + 0.25 * model.voices.pack("jf_test")
    assert name == "af_test(3)+jf_test(1)"
    assert np.allclose(pack.numpy(), expected.numpy(), atol=1e-7)
    mixed = run(model, HELLO, voice="af_test(3)+jf_test(1)")
    plain = run(model, HELLO, voice="af_test")
    assert mixed.details["voice"] == "af_test(3)+jf_test(1)"
    assert not np.array_equal(mixed.audio.samples, plain.audio.samples)


@pytest.mark.parametrize("voice, match", [
    ("af_tset", "unknown voice 'af_tset'"),
    ("af_test(2)+", "empty term|cannot read"),
    ("af_test(0)", "must be positive"),
    ("af_test((2)", "cannot read"),
    ("", "is empty"),
])
def test_bad_voices_are_refused_before_synthesis(model, voice: str, match: str) -> None:
    with pytest.raises(UsageError, match=match) as info:
        run(model, HELLO, voice=voice)
    if "unknown" in match:
        assert "af_test, jf_test" in info.value.message
        assert "did you mean 'af_test'" in (info.value.hint or "")


def test_speed_shortens_the_audio(model) -> None:
    slow, fast = run(model, LONGER, speed=0.5), run(model, LONGER, speed=2.0)
    assert slow.audio.duration > fast.audio.duration
    assert sum(slow.details["pred_dur"][0]) > sum(fast.details["pred_dur"][0])


def test_word_timings_follow_the_durations(model) -> None:
    result = run(model, f"{HELLO}\n{LONGER}")
    words = result.words
    assert [w.text for w in words] == HELLO.split() + LONGER.split()
    starts = [w.start for w in words]
    assert starts == sorted(starts) and all(w.end >= w.start for w in words)
    assert words[-1].end <= result.audio.duration + 1e-6
    second_line = len(HELLO.split())
    first_chunk_s = sum(result.details["pred_dur"][0]) * model.cfg.samples_per_duration_frame / 24000
    assert words[second_line].start >= first_chunk_s - 1e-9


def test_streaming_yields_sentences_with_their_words(model) -> None:
    session = model.session("tts", mode="streaming")
    events = list(session.stream(ac.TaskRequest(text=JAPANESE, seed=3, options={"phonemes": True})))
    pieces = [e for e in events if not e.is_final]
    final = events[-1].result
    assert len(pieces) == 2
    assert np.array_equal(np.concatenate([p.audio.samples for p in pieces]), final.audio.samples)
    assert [w.text for p in pieces for w in p.words] == [w.text for w in final.words]


def test_unknown_symbols_are_dropped_with_a_warning(model) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run(model, "həlˈoʊ #wˈɜɹld§.")
    messages = [str(w.message) for w in caught if issubclass(w.category, AudiocppWarning)]
    assert any("'#'" in m and "'§'" in m for m in messages), messages
    assert result.details["dropped_symbols"] == "#§"


def test_nothing_speakable_is_an_error(model) -> None:
    with pytest.raises(UsageError, match="nothing Kokoro can speak"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run(model, "### §§§")


def test_clone_and_design_are_refused_naming_the_families_that_do_them(model) -> None:
    with pytest.raises(UsageError, match="does not support task 'clon'") as info:
        model.session("clon")
    assert "omnivoice" in info.value.hint and "--voice" in info.value.hint
    with pytest.raises(UsageError, match="does not support task 'design'"):
        model.session("design")


def test_overlong_phoneme_line_is_refused(model) -> None:
    with pytest.raises(UsageError, match="at most"):
        run(model, "a" * (model.cfg.max_phonemes + 1))
