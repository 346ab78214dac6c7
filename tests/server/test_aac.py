"""``response_format: "aac"``, one of OpenAI's six, on a server installed as the docs say: the ``serve``
extra brings PyAV, which encodes it; without PyAV an ``ffmpeg`` on PATH does; with neither it is a 400 that
names the fix. The first through the session's real ``audiocpp serve`` (the ``openai`` client), the other
two in this process (PyAV and ffmpeg hidden there), through the same ``openai`` client over the app."""

from __future__ import annotations

import io
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import av  # the test extra's (tools/setup_env.sh); bound here, so decoding works while a test hides it
import pytest

from tests.support import REPO

from .conftest import FAST, ServerProcess

TEXT = "Hello from the server in AAC."
#: AAC frames are 1024 samples, and the encoder primes with one more frame: decoded, a file runs up to
#: two frames (at 24 kHz, 85 ms) beyond the audio it was given.
SLACK_S = 2 * 1024 / 24000


def decoded_seconds(data: bytes) -> tuple[float, int]:
    """(seconds, sample rate) of ADTS AAC, decoded with PyAV."""
    with av.open(io.BytesIO(data)) as container:
        samples = sum(frame.samples for frame in container.decode(audio=0))
        rate = container.streams.audio[0].rate
    return samples / rate, rate


def speak_aac(client) -> tuple[bytes, float]:
    """(the AAC body, the audio's seconds as the server reports them) of one request."""
    raw = client.audio.speech.with_raw_response.create(
        model="omnivoice-demo", voice="alloy", input=TEXT, response_format="aac",
        extra_body={"seed": 3, **FAST})
    assert raw.headers["content-type"] == "audio/aac"
    return raw.content, float(raw.headers["x-audiocpp-audio-duration-ms"]) / 1000


def test_the_serve_extra_installs_pyav() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(req.split(">")[0].split("=")[0].strip() == "av" for req in extras["serve"])
    assert any(req.split(">")[0].strip() == "av" for req in extras["test"])  # tools/setup_env.sh's install


def test_aac_decodes_to_the_audio_with_pyav(server: ServerProcess, client) -> None:
    data, seconds = speak_aac(client)
    decoded, rate = decoded_seconds(data)
    assert rate == 24000
    assert seconds - 0.01 <= decoded <= seconds + SLACK_S, (decoded, seconds)


# -- without PyAV, in this process ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def in_process(server_cache: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The demo model's server state in this process (the session's cache folder, no line per request)."""
    from audiocpp.server.cli import ServeArgs, build_state

    with pytest.MonkeyPatch.context() as env:
        env.setenv("AUDIOCPP_CACHE_DIR", server_cache["AUDIOCPP_CACHE_DIR"])
        state = build_state(ServeArgs(family="omnivoice", voices_dir=tmp_path_factory.mktemp("voices"),
                                      quiet=True))
    yield state
    state.shutdown()


@pytest.fixture()
def without_pyav(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``import av`` fails (as on a server installed without the serve extra); formats probed afresh."""
    from audiocpp.server import encoding

    monkeypatch.setitem(sys.modules, "av", None)
    encoding.available.cache_clear()
    yield
    encoding.available.cache_clear()


@pytest.fixture()
def app_client(in_process) -> Iterator[object]:
    """The ``openai`` client over the app in this process (its HTTP client: Starlette's, an httpx client)."""
    from fastapi.testclient import TestClient
    from openai import OpenAI

    from audiocpp.server.app import create_app

    with TestClient(create_app(in_process)) as http:
        yield OpenAI(base_url="http://testserver/v1", api_key="unused", max_retries=0, http_client=http)


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="no ffmpeg on PATH")
def test_without_pyav_ffmpeg_encodes_aac(without_pyav: None, app_client) -> None:
    data, seconds = speak_aac(app_client)
    decoded, rate = decoded_seconds(data)
    assert rate == 24000 and seconds - 0.01 <= decoded <= seconds + SLACK_S, (decoded, seconds)


def test_without_pyav_or_ffmpeg_the_error_names_the_fix(without_pyav: None, app_client,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import openai

    monkeypatch.setattr(shutil, "which", lambda name, *args, **kwargs: None)
    with pytest.raises(openai.BadRequestError) as info:
        speak_aac(app_client)
    error = info.value.body
    assert error["code"] == "unsupported_format" and error["param"] == "response_format"
    assert "pip install 'audiocpp[serve]'" in error["message"] and "ffmpeg" in error["message"], error
    formats = json.loads(app_client.models.with_raw_response.list().text)["response_formats"]
    assert "aac" not in formats and "wav" in formats


def test_the_docs_name_the_fix() -> None:
    text = (REPO / "docs" / "server.md").read_text()
    assert "pip install 'audiocpp[serve]'` or install ffmpeg" in text and "pip install av" not in text
    assert Path(REPO / "server" / "encoding.py").read_text().count("pip install 'audiocpp[serve]'") == 1
