"""One line per request on the terminal (stderr), on by default (``--quiet``: off):

    12:03:04 POST /v1/audio/speech 200 model=kokoro voice=alloy audio=2.35s wall=0.41s rtf=0.17

It is written from the record the JSON access log gets (``audit``), so what it shows is what that log may
show: the route without its query (a WebSocket's ``api_key`` is there), a key by its label, never the text.
``/health`` and ``/metrics`` (probes and scrapes, every few seconds) are left out.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

#: Routes polled by machines: a line each would bury the requests.
SKIPPED = ("/health", "/metrics")


def _what(record: dict[str, Any]) -> str:
    """``POST /v1/audio/speech``, ``WS /v1/audio/speech/stream`` or ``WYOMING synthesize``."""
    protocol = record.get("protocol")
    if protocol == "wyoming":
        return "WYOMING synthesize"
    method = "WS" if protocol == "websocket" else record.get("method") or "-"
    return f"{method} {record.get('route') or '-'}"


def _timing(record: dict[str, Any]) -> list[str]:
    """``audio=`` (seconds sent), ``wall=`` and ``rtf=`` (wall over audio) where there was audio."""
    wall = (record.get("latency_ms") or 0.0) / 1000
    audio = record.get("audio_s")
    parts = [f"audio={audio:.2f}s"] if audio else []
    parts.append(f"wall={wall:.2f}s")
    if audio:
        parts.append(f"rtf={wall / audio:.2f}")
    return parts


def format_line(record: dict[str, Any]) -> str:
    """The line of one access-log record (its fields: ``audit.FIELDS``)."""
    clock = time.strftime("%H:%M:%S", time.localtime(record.get("time") or time.time()))
    parts = [clock, _what(record), str(record.get("status"))]
    for field in ("model", "voice", "key"):
        if record.get(field):
            parts.append(f"{field}={record[field]}")
    if record.get("sentences"):
        parts.append(f"sentences={record['sentences']}")
    return " ".join(parts + _timing(record))


class RequestLog:
    """Writes :func:`format_line` of every request but the polled routes to ``stream`` (stderr)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        if record.get("route") in SKIPPED:
            return
        line = format_line(record)
        with self._lock:
            try:
                print(line, file=self.stream or sys.stderr, flush=True)
            except (OSError, ValueError):  # a closed terminal: the request is served anyway
                pass
