"""``audiocpp serve`` start-up errors (one message, exit 2 for usage, 1 for runtime, no traceback)
and the server's answer to an internal failure (a 500 with a message; it stays up)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from audiocpp.engine.model import LoadedModel
from audiocpp.engine.records import AudioBuffer
from audiocpp.engine.registry import get_family
from audiocpp.engine.session import PreparedRequest, Session, Synthesis
from tests.support import run_cli


@pytest.mark.parametrize(("args", "code", "words"), [
    (["--model", "/nonexistent/model.gguf"], 2, "does not exist"),
    (["--family", "nofamily"], 2, "unknown family"),
    (["--max-concurrency", "0"], 2, "--max-concurrency"),
    (["--max-queue", "-1"], 2, "--max-queue"),
    (["--session-option", "voxcpm2.threads=1"], 2, "no served model"),
    (["--session-option", "omnivoice.nothing=1"], 2, "no session option"),
    (["--load-option", "codec"], 2, "key=value"),
])
def test_bad_arguments(args: list[str], code: int, words: str, tmp_path: Path,
                       capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI's own ``main`` in process: these fail before any model loads."""
    from audiocpp.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(["serve", "--voices-dir", str(tmp_path), *args])
    err = capsys.readouterr().err
    assert info.value.code == code, err
    assert words in err and "Traceback" not in err, err


def test_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        proc = run_cli("serve", "--voices-dir", tmp_path, "--port", str(port), timeout=600)
    assert proc.returncode == 1, proc.stderr
    assert "address already in use" in proc.stderr.lower() and "Traceback" not in proc.stderr


def test_missing_extra_names_the_install_command(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['fastapi'] = None; from audiocpp.cli.main import main; "
            f"main(['serve', '--voices-dir', {str(tmp_path)!r}])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1
    assert "pip install 'audiocpp[serve]'" in proc.stderr and "Traceback" not in proc.stderr


class BrokenSession(Session):
    def _synthesize(self, request: PreparedRequest) -> Generator[AudioBuffer, None, Synthesis]:
        raise RuntimeError("the family broke")
        yield  # a generator, as families are


class BrokenModel(LoadedModel):
    """A real LoadedModel (the OmniVoice spec) whose synthesis fails with a bug."""

    sample_rate = 24000

    def _create_session(self, task: Any, mode: Any, options: dict[str, Any]) -> Session:
        return BrokenSession(self, task, mode, options)


def test_internal_failure_is_a_500_and_the_server_stays_up(tmp_path: Path) -> None:
    from audiocpp.server.app import ServerState, create_app
    from audiocpp.server.metrics import ServerMetrics
    from audiocpp.server.models import ServedModel
    from audiocpp.server.scheduler import ModelWorker
    from audiocpp.server.voices import VoiceStore

    served = ServedModel("broken", BrokenModel(get_family("omnivoice").spec, None))
    state = ServerState(models={"broken": served},
                        workers={"broken": ModelWorker("broken", served.model, 1, 2)},
                        voices=VoiceStore(tmp_path / "voices"), metrics=ServerMetrics())
    with TestClient(create_app(state)) as http:
        for stream_format in (None, "sse", "audio"):
            body = {"input": "Hi.", "response_format": "pcm"}
            if stream_format:
                body["stream_format"] = stream_format
            r = http.post("/v1/audio/speech", json=body)
            assert r.status_code == 500, r.text
            error = r.json()["error"]
            assert error["type"] == "server_error" and "RuntimeError: the family broke" in error["message"]
        assert http.get("/health").json()["models"]["broken"] == {"family": "omnivoice", "queued": 0,
                                                                   "synthesizing": 0, "capacity": 3,
                                                                   "max_batch": 1}
        assert 'audiocpp_requests_total{endpoint="/v1/audio/speech",model="broken",status="500"} 3' in \
            http.get("/metrics").text
    state.shutdown()
