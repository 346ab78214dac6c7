"""One loaded model used by several sessions in threads, as the server and any Python caller
may: the engine's per-model guard (engine/guard.py) makes each request come out exactly as it
does alone. VoxCPM2 is the family that is not thread-safe on its own (static KV caches shared
by its sessions: four unguarded threads gave wrong audio and "KV cache is full" errors).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from audiocpp.engine.errors import UsageError
from audiocpp.engine.records import TaskRequest

VOX = {"max_tokens": 4, "min_tokens": 3, "retry_badcase": False}


def _request(i: int) -> TaskRequest:
    return TaskRequest(text=f"Number {i} is here.", options={**VOX, "seed": i})


def _speak(model: Any, i: int, mode: str = "offline") -> list[bytes]:
    """The request's audio as bytes: every streamed piece and the final audio."""
    session = model.session("tts", mode)
    pieces = []
    for event in session.stream(_request(i)):
        pieces.append(event.audio.samples.tobytes())
    return pieces


@pytest.fixture(scope="module")
def vox(tiny_models: dict[str, Any]) -> Any:
    return tiny_models["voxcpm2"]


MODES = ["offline", "streaming", "offline"]


def test_threads_on_one_model_give_the_sequential_audio(vox: Any) -> None:
    """Three requests (offline and streamed) alone, then in three threads at once: the same
    pieces, byte for byte. Without the guard this gave "KV cache is full" errors."""
    alone = [_speak(vox, i, mode) for i, mode in enumerate(MODES)]
    with ThreadPoolExecutor(3) as pool:
        together = list(pool.map(lambda i: _speak(vox, i, MODES[i]), range(3)))
    assert together == alone
    assert len({b"".join(p) for p in alone}) == 3  # three different requests, not one answer


def test_an_open_stream_does_not_hold_back_other_threads(vox: Any) -> None:
    """A stream its caller has stopped reading does not block the model: the executor runs it on and
    keeps its pieces, another thread's request finishes meanwhile, and the first stream, read later,
    gives exactly what it gives alone."""
    alone = _speak(vox, 0, "streaming")
    first = vox.session("tts", "streaming").stream(_request(0))
    pieces = [next(first).audio.samples.tobytes()]
    done = threading.Event()
    other = threading.Thread(target=lambda: (_speak(vox, 1), done.set()))
    other.start()
    other.join(timeout=600)
    assert done.is_set(), "another thread's request waited for an unread stream"
    pieces += [event.audio.samples.tobytes() for event in first]
    assert pieces == alone


def test_a_second_request_in_the_thread_of_an_open_stream_runs(vox: Any) -> None:
    """A request made in the thread that holds an open stream runs (no deadlock, no refusal): the
    stream's rows go on in the executor's thread; both give their alone-audio."""
    alone = [_speak(vox, 0), _speak(vox, 1)]
    first = vox.session("tts").stream(_request(0))
    head = next(first).audio.samples.tobytes()
    second = vox.session("tts").run(_request(1))
    assert [second.audio.samples.tobytes()] == alone[1][-1:]
    assert [head] + [event.audio.samples.tobytes() for event in first] == alone[0]


def test_waiting_inside_the_models_own_thread_is_refused_not_a_deadlock(vox: Any) -> None:
    """Waiting on a request of the model from a thread that holds the model's guard (a family hook)
    would wait forever: it is refused with a clear error."""
    from audiocpp.engine.guard import model_guard

    with model_guard(vox).held(what="a hook"), pytest.raises(UsageError, match="would wait forever"):
        vox.session("tts").run(_request(1))
    assert _speak(vox, 1)  # and the model is free again


def test_voice_prompt_hooks_are_guarded_and_reenter(tiny_models: dict[str, Any]) -> None:
    """The hooks of every family hold the guard (a load inside a stream re-enters it)."""
    from audiocpp.engine.loaded_model import LoadedModel

    for model in tiny_models.values():
        for name in ("load_voice_prompt", "encode_voice_prompt", "decode_voice_prompt"):
            method = getattr(type(model), name)
            if method is not getattr(LoadedModel, name):
                assert getattr(method, "__audiocpp_guarded__", False), (model.family, name)
    assert tiny_models["omnivoice"].guard is tiny_models["omnivoice"].guard
