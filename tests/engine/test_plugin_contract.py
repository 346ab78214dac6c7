"""What docs/adding-a-family.md promises a family's code, checked in-process on the toy family:
what ``_synthesize`` receives (``request.options``, ``self.options``, ``self.model``), what it may
return (``Synthesis`` with or without ``chunks``), ``_load``'s path (the demo model when None) and
the Python spelling of session options."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from audiocpp.engine.plugin_api import (
    AudioBuffer,
    FamilyPlugin,
    LoadedModel,
    PreparedRequest,
    Session,
    Synthesis,
    TaskRequest,
    UsageError,
)


class Recorder(Session):
    """Records what the base hands a family; yields ``pieces`` pieces; ``chunks=`` only if asked."""

    seen: list[tuple[PreparedRequest, Session]] = []

    def _synthesize(self, request: PreparedRequest):
        Recorder.seen.append((request, self))
        pieces = [AudioBuffer(np.full(10, i, np.float32), self.model.sample_rate) for i in range(3)]
        for piece in pieces:
            if request.streaming:
                yield piece
        audio = AudioBuffer(np.concatenate([p.samples for p in pieces]), self.model.sample_rate)
        return Synthesis(audio, pieces if request.options["toytone.gain"] > 0.9 else [])


class RecorderModel(LoadedModel):
    sample_rate = 8000

    def _create_session(self, task, mode, options):
        return Recorder(self, task, mode, options)


@pytest.fixture()
def recorder(toy_plugin) -> RecorderModel:
    return RecorderModel(toy_plugin.spec, None, {})


def test_what_synthesize_receives(recorder: RecorderModel) -> None:
    Recorder.seen.clear()
    recorder.session("tts", pitch="1.5").run(TaskRequest(text="hi", options={"toytone.gain": "0.25"}))
    request, session = Recorder.seen[-1]
    assert request.options == {"seed": request.seed, "toytone.gain": 0.25}  # full names, typed, defaults in
    assert isinstance(request.seed, int) and request.text == "hi" and not request.streaming
    assert request.voice is None and request.voice_prompt is None
    assert session.options == {"pitch": 1.5} and session.model is recorder and session.sample_rate == 8000
    recorder.session("tts").run(TaskRequest(text="hi", seed=4))
    request, session = Recorder.seen[-1]
    assert request.options == {"seed": 4, "toytone.gain": 0.5} and session.options == {"pitch": 1.0}


def test_chunk_count_with_and_without_chunks(recorder: RecorderModel) -> None:
    streaming = recorder.session("tts", mode="streaming")
    events = list(streaming.stream(TaskRequest(text="x")))
    assert [e.kind for e in events] == ["audio"] * 3 + ["final"]
    result = events[-1].result
    assert result.chunks == [] and result.metrics.num_chunks == 3  # the pieces it yielded
    result = streaming.run(TaskRequest(text="x", options={"toytone.gain": 1}))
    assert len(result.chunks) == 3 and result.metrics.num_chunks == 3
    result = recorder.session("tts").run(TaskRequest(text="x"))
    assert result.chunks == [] and result.metrics.num_chunks == 1  # offline, nothing yielded, no chunks


def test_session_options_from_python_are_keywords(recorder: RecorderModel) -> None:
    with pytest.raises(UsageError) as err:
        recorder.session("tts", brightness=2)
    assert err.value.message == "toytone has no session option 'brightness'"
    assert err.value.hint == "session options of toytone (keyword arguments of session()): pitch"
    with pytest.raises(UsageError, match="below the minimum 0.25"):
        recorder.session("tts", pitch=0.1)
    # create_session (what the CLI, the server and batch call) takes the CLI's family.name too.
    assert recorder.create_session("tts", "offline", {"toytone.pitch": "2"}).options == {"pitch": 2.0}


def test_the_demo_model_is_written_once_and_loads(toy_plugin, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("AUDIOCPP_CACHE_DIR", str(tmp_path))
    path = toy_plugin.demo_model_path()
    assert path.parent == tmp_path / "demo" and (path / "model.safetensors").is_file()
    assert toy_plugin.demo_model_path() == path
    model = toy_plugin.load(path)
    assert model.load_options == {"slowdown": 1.0}
    audio = model.session("tts").run(TaskRequest(text="ab", seed=1)).audio
    assert audio.num_samples == 2 * 320

    class NoDemo(FamilyPlugin):
        name = "toytone"
        spec_file = toy_plugin.spec_file

    assert NoDemo().demo_model_path() is None


def test_spec_path_and_its_spec(toy_plugin) -> None:
    assert toy_plugin.spec_path == Path(toy_plugin.spec_file)
    assert json.loads(toy_plugin.spec_path.read_text())["family"] == toy_plugin.spec.family == "toytone"
