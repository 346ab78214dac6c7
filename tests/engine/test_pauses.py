"""engine.pauses: a text with pauses or SSML runs part by part through the family's own program, in
every mode and in a batch, with silences of the asked length between the parts, the streamed pieces
joining into the final audio, and word timings moved to where their part lies."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from audiocpp.engine import Mode, Task, TaskRequest
from audiocpp.engine.records import AudioBuffer, AudioPiece, WordTiming
from audiocpp.engine.session import Session, Synthesis

from .test_batching import AddOp


class WordSession(Session):
    """Ten samples of 1.0 per character, one op (batched with the other rows'), one word: the text."""

    def _synthesize(self, request: Any):
        value = yield AddOp(float(request.seed % 1000))
        rate = self.sample_rate
        audio = AudioBuffer(np.full(10 * len(request.text), 1.0, np.float32), rate)
        words = [WordTiming(request.text, 0.0, audio.duration)]
        if request.streaming:
            yield AudioPiece(audio, words)
        return Synthesis(audio, details={"value": value, "text": request.text}, words=words)


@pytest.fixture()
def toy_model(toy_plugin, toy_model_dir):
    return toy_plugin.load(toy_model_dir)


def session(model, mode: Mode = Mode.OFFLINE) -> WordSession:
    return WordSession(model, Task.TTS, mode, {})


def expected(model, *parts: str | float) -> np.ndarray:
    rate = model.sample_rate
    return np.concatenate([np.zeros(round(p * rate), np.float32) if isinstance(p, float)
                           else np.ones(10 * len(p), np.float32) for p in parts])


def test_offline_splices_the_silences_and_moves_the_words(toy_model) -> None:
    result = session(toy_model).run(TaskRequest(text="ab [pause 0.5s] cde", seed=1))
    rate = toy_model.sample_rate
    assert np.array_equal(result.audio.samples, expected(toy_model, "ab", 0.5, "cde"))
    assert np.array_equal(np.concatenate([c.samples for c in result.chunks]), result.audio.samples)
    assert [w.text for w in result.words] == ["ab", "cde"]
    assert [t for w in result.words for t in (w.start, w.end)] == pytest.approx(
        [0.0, 20 / rate, 0.5 + 20 / rate, 0.5 + 50 / rate])
    assert result.details["script"] == [{"text": "ab"}, {"pause_s": 0.5}, {"text": "cde"}]
    assert [p["text"] for p in result.details["parts"]] == ["ab", "cde"]


def test_streaming_pieces_join_into_the_final_audio(toy_model) -> None:
    events = list(session(toy_model, Mode.STREAMING).stream(
        TaskRequest(text="<speak><p>ab</p><p>cd<break time='250ms'/>e</p></speak>", seed=1)))
    final = events[-1].result
    pieces = [e for e in events if not e.is_final]
    assert np.array_equal(np.concatenate([e.audio.samples for e in pieces]), final.audio.samples)
    assert np.array_equal(final.audio.samples, expected(toy_model, "ab", 0.8, "cd", 0.25, "e"))
    streamed_words = [(w.text, w.start) for e in pieces for w in e.words]
    assert streamed_words == [(w.text, w.start) for w in final.words]
    assert [w.text for w in final.words] == ["ab", "cd", "e"]


def test_a_script_row_in_a_batch_gives_what_it_gives_alone(toy_model) -> None:
    s = session(toy_model)
    requests = [TaskRequest(text="ab [pause 0.1s] cd", seed=1), TaskRequest(text="plain", seed=2),
                TaskRequest(text="[pause 0.2s]", seed=3)]
    batch = s.run_batch(requests)
    for request, result in zip(requests, batch):
        assert np.array_equal(s.run(request).audio.samples, result.audio.samples)
    assert np.array_equal(batch[2].audio.samples, expected(toy_model, 0.2))
    assert batch[1].details == {"value": 3.0, "text": "plain"}  # plain text runs the family's program as is
