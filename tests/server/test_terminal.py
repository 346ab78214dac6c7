"""What ``audiocpp serve`` prints on its terminal: one line per request by default (``--quiet``: none), and
the one-line notice of a ``--max-batch`` capped to what batching measured to pay for the family
(``--max-batch-force``: as given). Real servers as subprocesses, real clients (``openai``, ``httpx``,
``websockets``)."""

from __future__ import annotations

import asyncio
import io
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
import websockets

from .conftest import FAST, ServerProcess

#: A POST's line: time, method and route, status, model, voice, [key,] audio, wall, rtf.
POST_LINE = re.compile(r"^\d\d:\d\d:\d\d POST /v1/audio/speech 200 model=omnivoice-demo voice=\S+ (key=\S+ )?"
                       r"audio=(\d+\.\d\d)s wall=(\d+\.\d\d)s rtf=(\d+\.\d\d)$", re.M)
WS_LINE = re.compile(r"^\d\d:\d\d:\d\d WS /v1/audio/speech/stream \d+ model=omnivoice-demo .*sentences=1 "
                     r"audio=\d+\.\d\ds wall=\d+\.\d\ds rtf=\d+\.\d\d$", re.M)
NOTICE = "--max-batch 8 capped to 1 for omnivoice-demo"


def wait_for(server: ServerProcess, pattern: re.Pattern[str], count: int, timeout: float = 10) -> list:
    """The log's matches of ``pattern`` once there are ``count`` (the line follows the response)."""
    deadline = time.monotonic() + timeout
    while True:
        found = pattern.findall(server.log_path.read_text(errors="replace"))
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


# -- a line per request ---------------------------------------------------------------------------------
def test_each_request_prints_one_line(server: ServerProcess, client) -> None:
    before = len(POST_LINE.findall(server.log_path.read_text(errors="replace")))
    raw = client.audio.speech.with_raw_response.create(model="omnivoice-demo", voice="alloy", input="Hello.",
                                                       response_format="wav", extra_body={"seed": 1, **FAST})
    lines = wait_for(server, POST_LINE, before + 1)
    assert len(lines) == before + 1, server.log()
    _, audio, wall, rtf = lines[-1]
    assert float(audio) == pytest.approx(float(raw.headers["x-audiocpp-audio-duration-ms"]) / 1000, abs=0.01)
    assert float(rtf) == pytest.approx(float(wall) / float(audio), abs=0.02)
    log = server.log_path.read_text(errors="replace")
    assert " /health " not in log and " /metrics " not in log  # probes and scrapes: no line


def test_a_websocket_session_prints_one_line(server: ServerProcess) -> None:
    async def session() -> None:
        url = server.url.replace("http", "ws") + "/v1/audio/speech/stream"
        async with websockets.connect(url) as ws:
            config = {"type": "session.config", "model": "omnivoice-demo", "seed": 2, **FAST}
            await ws.send(json.dumps(config))
            await ws.send(json.dumps({"type": "input.text", "text": "One sentence."}))
            await ws.send(json.dumps({"type": "input.done"}))
            async for _ in ws:
                pass

    before = len(WS_LINE.findall(server.log_path.read_text(errors="replace")))
    asyncio.run(session())
    assert len(wait_for(server, WS_LINE, before + 1)) == before + 1, server.log()


def test_the_line_format() -> None:
    from audiocpp.server.request_log import RequestLog, format_line

    record = {"time": 0, "protocol": "http", "method": "GET", "route": "/v1/models", "status": 200,
              "latency_ms": 12.0, "key": "alice"}
    assert format_line(record).split(" ", 1)[1] == "GET /v1/models 200 key=alice wall=0.01s"
    wyoming = {"time": 0, "protocol": "wyoming", "route": "wyoming", "status": 200, "model": "kokoro",
               "voice": "jf_alpha", "audio_s": 2.0, "latency_ms": 500.0}
    assert format_line(wyoming).split(" ", 1)[1] == \
        "WYOMING synthesize 200 model=kokoro voice=jf_alpha audio=2.00s wall=0.50s rtf=0.25"

    sink = io.StringIO()
    log = RequestLog(sink)
    log.write({**record, "route": "/health"})
    log.write({**record, "route": "/metrics"})
    assert sink.getvalue() == ""
    log.write(record)
    assert sink.getvalue() == format_line(record) + "\n"


# -- --max-batch capped, --quiet ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def capped_server(tmp_path_factory: pytest.TempPathFactory,
                  server_cache: dict[str, str]) -> Iterator[ServerProcess]:
    """The OmniVoice demo (CPU), ``--max-batch 8`` given, ``--quiet``."""
    root = tmp_path_factory.mktemp("capped")
    proc = ServerProcess(["--max-batch", "8", "--quiet", "--voices-dir", str(root / "voices")],
                         root / "serve.log", env=server_cache)
    yield proc
    proc.stop()
    proc.assert_quiet()


def test_max_batch_above_the_family_size_is_capped_with_a_notice(capped_server: ServerProcess) -> None:
    health = httpx.get(capped_server.url + "/health", timeout=10).json()["models"]["omnivoice-demo"]
    assert health["max_batch"] == 1 and health["capacity"] == 1 + 8  # --max-concurrency follows the cap
    log = capped_server.log()
    notice = [line for line in log.splitlines() if NOTICE in line]
    assert len(notice) == 1, log
    assert "--max-batch-force" in notice[0] and "docs/batching.md" in notice[0], notice


def test_quiet_prints_no_line_per_request(capped_server: ServerProcess) -> None:
    r = httpx.post(capped_server.url + "/v1/audio/speech", timeout=120,
                   json={"model": "omnivoice-demo", "input": "Hello.", "seed": 1, **FAST})
    assert r.status_code == 200
    time.sleep(0.3)
    log = capped_server.log()
    assert "/v1/audio/speech" not in log and "rtf=" not in log, log


def test_max_batch_force_keeps_the_value(tmp_path: Path, server_cache: dict[str, str]) -> None:
    proc = ServerProcess(["--max-batch", "8", "--max-batch-force", "--voices-dir", str(tmp_path / "voices")],
                         tmp_path / "serve.log", env=server_cache)
    try:
        health = httpx.get(proc.url + "/health", timeout=10).json()["models"]["omnivoice-demo"]
        assert health["max_batch"] == 8 and NOTICE not in proc.log()
    finally:
        proc.stop()


@pytest.mark.parametrize(("given", "measured", "force", "expected", "notice"), [
    (None, 1, False, 1, False),  # no --max-batch: the family's size
    (8, 1, False, 1, True),  # above a measured size below the generic 8: capped
    (8, 1, True, 8, False),  # --max-batch-force
    (1, 1, False, 1, False),
    (16, 8, False, 16, False),  # a family at the generic size measured no limit: as given
    (4, 8, False, 4, False),
])
def test_the_cap_rule(given: int | None, measured: int, force: bool, expected: int, notice: bool,
                      capsys: pytest.CaptureFixture[str]) -> None:
    from audiocpp.server.cli import ServeArgs, effective_max_batch

    model = SimpleNamespace(family="omnivoice", load_options={}, default_max_batch=lambda: measured)
    args = ServeArgs(max_batch=given, max_batch_force=force)
    assert effective_max_batch(args, "m", model) == expected
    err = capsys.readouterr().err
    assert (f"capped to {measured} for m" in err) is notice and err.count("\n") == int(notice), err
