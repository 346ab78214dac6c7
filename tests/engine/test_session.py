"""The session base: validation, seeding, streaming protocol and metrics (with the toy family)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from audiocpp.engine import Mode, Task, TaskRequest, UsageError
from audiocpp.engine.errors import AudioError


@pytest.fixture()
def toy_model(toy_plugin, toy_model_dir: Path):
    return toy_plugin.load(toy_model_dir)


def test_run_returns_audio_and_metrics(toy_model) -> None:
    result = toy_model.session("tts").run(TaskRequest(text="two words", seed=5))
    assert result.task is Task.TTS and result.mode is Mode.OFFLINE
    assert result.audio.sample_rate == 16000
    assert result.audio.num_samples == 8 * 160
    m = result.metrics
    assert m.seed == 5 and m.audio_s == pytest.approx(0.08)
    assert m.wall_s > 0 and m.rtf == pytest.approx(m.wall_s / m.audio_s)
    assert m.time_to_first_audio_s is not None and m.peak_rss_mb > 10
    assert result.details == {"words": 2}


def test_streaming_yields_pieces_then_final_and_matches_offline(toy_model) -> None:
    events = list(toy_model.session("tts", mode="streaming").stream(TaskRequest(text="a bb ccc", seed=1)))
    kinds = [e.kind for e in events]
    assert kinds == ["audio", "audio", "audio", "final"]
    assert [e.index for e in events] == [0, 1, 2, 3]
    joined = np.concatenate([e.audio.samples for e in events[:-1]])
    final = events[-1].result
    np.testing.assert_array_equal(joined, final.audio.samples)
    offline = toy_model.session("tts").run(TaskRequest(text="a bb ccc", seed=1))
    np.testing.assert_array_equal(offline.audio.samples, final.audio.samples)
    assert final.metrics.time_to_first_audio_s <= final.metrics.wall_s


def test_seeds_are_reproducible_and_reported(toy_model) -> None:
    session = toy_model.session("tts")
    a = session.run(TaskRequest(text="seed", seed=11)).audio.samples
    b = session.run(TaskRequest(text="seed", seed=11)).audio.samples
    c = session.run(TaskRequest(text="seed", seed=12)).audio.samples
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    unseeded = session.run(TaskRequest(text="seed"))
    again = session.run(TaskRequest(text="seed", seed=unseeded.metrics.seed))
    np.testing.assert_array_equal(unseeded.audio.samples, again.audio.samples)


@pytest.mark.parametrize(
    ("request_kwargs", "message"),
    [
        ({"text": "   "}, "text to synthesize is empty"),
        ({"text": "x", "options": {"nope": 1}}, "no request option 'nope'"),
        ({"text": "x", "options": {"toytone.gain": "2"}}, "above the maximum"),
        ({"text": "x", "instruct": "female"}, "no request option 'instruct'"),
        ({"text": "x", "seed": 3, "options": {"seed": 4}}, "given twice"),
    ],
)
def test_bad_requests_are_usage_errors(toy_model, request_kwargs, message) -> None:
    with pytest.raises(UsageError, match=message):
        toy_model.session("tts").run(TaskRequest(**request_kwargs))


def test_tasks_modes_and_session_options_come_from_the_spec(toy_model) -> None:
    with pytest.raises(UsageError, match="does not support task 'clon'"):
        toy_model.session("clon")
    with pytest.raises(UsageError, match="unknown mode"):
        toy_model.session("tts", mode="batch")
    with pytest.raises(UsageError, match="has no session option"):
        toy_model.session("tts", turbo=True)


def test_a_mistyped_option_suggests_the_close_name(toy_model, toy_plugin) -> None:
    with pytest.raises(UsageError, match="has no session option") as caught:
        toy_model.session("tts", pich=2.0)
    assert caught.value.hint.startswith("did you mean 'pitch'? ")
    with pytest.raises(UsageError, match="has no request option") as caught:
        toy_model.session("tts").run(TaskRequest(text="ab", options={"toytone.gian": 0.2}))
    assert caught.value.hint.startswith("did you mean 'toytone.gain'? ")
    with pytest.raises(UsageError, match="no load option") as caught:
        toy_plugin.load(toy_model.path, {"slowdwn": "2"})
    assert caught.value.hint.startswith("did you mean 'slowdown'? ")
    with pytest.raises(UsageError) as caught:  # nothing close: just the list
        toy_model.session("tts", turbo=True)
    assert not caught.value.hint.startswith("did you mean")


def test_load_options_are_typed(toy_plugin, toy_model) -> None:
    slow = toy_plugin.load(toy_model.path, {"slowdown": "2"})
    assert slow.session("tts").run(TaskRequest(text="ab", seed=0)).audio.num_samples == 2 * 320
    with pytest.raises(UsageError, match="no load option"):
        toy_plugin.load(toy_model.path, {"fast": "1"})


def test_unreadable_voice_reference_is_an_audio_error(toy_model, tmp_path: Path) -> None:
    from audiocpp.engine import VoiceReference

    fake = tmp_path / "voice.wav"
    fake.write_text("this is not audio")
    with pytest.raises(AudioError):
        toy_model.session("tts").read_voice(VoiceReference(path=fake))
    # the toy family does not clone
    with pytest.raises(UsageError, match="task 'tts' takes no reference audio"):
        toy_model.session("tts").run(TaskRequest(text="x", voice=VoiceReference(path=fake)))
