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

from audiocpp.engine.loaded_model import LoadedModel
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
    (["--family", "omnivoice", "--session-option", "omnivoice.nothing=1"], 2, "no session option"),
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


@pytest.mark.parametrize(("args", "words"), [
    (["--max-batch", "0"], "--max-batch 0 must be at least 1"),
    (["--family", "omnivoice", "-s", "omnivoice.bogus=1"], "no session option 'omnivoice.bogus'"),
    (["--model", "nonexist.gguf"], "--model 'nonexist.gguf' does not exist"),
])
def test_flags_are_checked_before_the_port_is_bound(args: list[str], words: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A bad flag is the flag's error (exit 2) even with the port taken, not "cannot listen"."""
    from audiocpp.cli.main import main

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        with pytest.raises(SystemExit) as info:
            main(["serve", "--voices-dir", str(tmp_path), "--port", str(sock.getsockname()[1]), *args])
    err = capsys.readouterr().err
    assert info.value.code == 2 and words in err and "cannot listen" not in err, err


def test_the_bare_command_names_every_subcommand() -> None:
    from audiocpp.cli.main import app

    proc = run_cli()
    assert proc.returncode == 2 and proc.stderr.startswith("usage: audiocpp"), proc.stderr
    commands = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    assert {"serve", "batch", "download", "kernels"} <= commands
    assert not [c for c in commands if f"audiocpp {c}" not in proc.stderr and f"| {c}" not in proc.stderr], \
        proc.stderr


def test_one_sample_rate_range_for_the_cli_and_the_server(tmp_path: Path) -> None:
    """``--sample-rate`` and the server's ``sample_rate`` take the same rates, 8000 to 192000 Hz."""
    from audiocpp.cli.pipes import check_sample_rate
    from audiocpp.engine.errors import UsageError
    from audiocpp.server.encoding import FORMATS
    from audiocpp.server.errors import ApiError
    from audiocpp.server.speech import SpeechBody, output_rate

    for rate in (7999, 192001, 384000, 1000):
        with pytest.raises(UsageError, match="between 8000 and 192000 Hz"):
            check_sample_rate(rate, "wav16")
        with pytest.raises(ApiError, match="8000 to 192000 Hz"):
            output_rate(SpeechBody(input="x", sample_rate=rate), FORMATS["wav"], 24000)
    for rate in (8000, 96000, 192000):
        check_sample_rate(rate, "wav16")
        assert output_rate(SpeechBody(input="x", sample_rate=rate), FORMATS["wav"], 24000) == rate
    proc = run_cli("--text", "Hi.", "--out", tmp_path / "x.wav", "--sample-rate", "4000")
    assert proc.returncode == 2 and "between 8000 and 192000 Hz" in proc.stderr, proc.stderr


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
    from audiocpp.server.scheduler import ModelWorker
    from audiocpp.server.served_models import ServedModel
    from audiocpp.server.speech import synthesize
    from audiocpp.server.voices import VoiceStore

    served = ServedModel("broken", BrokenModel(get_family("omnivoice").spec, None))
    state = ServerState(models={"broken": served},
                        workers={"broken": ModelWorker("broken", served.model, 1, 2, synthesize=synthesize)},
                        voices=VoiceStore(tmp_path / "voices"), metrics=ServerMetrics())
    with TestClient(create_app(state), client=("127.0.0.1", 50000)) as http:  # /metrics: this machine
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
