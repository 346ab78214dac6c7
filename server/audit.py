"""The audit trail: ``--access-log FILE`` (or ``-``: stdout), one JSON line per request.

Each line: ``time`` (UTC, ISO 8601), ``key`` (the key's label; null on a server without keys),
``client`` (address), ``protocol`` (``http``, ``websocket``, ``wyoming``), ``method``, ``route`` (the
path, never the query string: a WebSocket's ``api_key`` is in it), ``model``, ``voice`` and ``clone``
(whether it cloned: a stored voice or ``ref_audio``), ``chars`` (characters of text in), ``audio_s``
(seconds of audio sent), ``status``, ``latency_ms``; a WebSocket session adds ``sentences``. The text
itself only with ``--log-text`` (``text``). The file is opened for appending (mode 0600 when created)
and reopened on SIGHUP, so logrotate and friends can move it away.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from audiocpp.engine.errors import UsageError

MAX_ROUTE_CHARS = 256
FIELDS = ("time", "key", "client", "protocol", "method", "route", "model", "voice", "clone", "chars",
          "audio_s", "status", "latency_ms")


class AccessLog:
    def __init__(self, target: str, *, log_text: bool = False) -> None:
        self.target = target
        self.log_text = log_text
        self._lock = threading.Lock()
        self._fh: TextIO | None = None
        self._open()

    def _open(self) -> None:
        if self.target == "-":
            self._fh = sys.stdout
            return
        path = Path(self.target).expanduser()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as error:
            raise UsageError(f"cannot write --access-log {str(path)!r}: {error.strerror or error}",
                             hint="give a file in a folder the server can write, or - for stdout") from None
        self._fh = os.fdopen(fd, "a", encoding="utf-8", buffering=1)

    def reopen(self) -> str:
        """Open the file again (after a rotation moved it); stdout stays as it is."""
        if self.target == "-":
            return "the access log is stdout"
        with self._lock:
            old = self._fh
            try:
                self._open()
            except UsageError as error:
                self._fh = old
                return f"the access log was not reopened: {error.message}"
            if old is not None:
                old.close()
        return f"access log reopened: {self.target}"

    def write(self, record: dict[str, Any]) -> None:
        line = {name: record.get(name) for name in FIELDS}
        line["time"] = datetime.fromtimestamp(record.get("time") or time.time(), timezone.utc).isoformat(
            timespec="milliseconds").replace("+00:00", "Z")
        route = line.get("route")
        if isinstance(route, str) and len(route) > MAX_ROUTE_CHARS:
            line["route"] = route[:MAX_ROUTE_CHARS] + "..."
        if line.get("audio_s") is not None:
            line["audio_s"] = round(float(line["audio_s"]), 3)
        if "sentences" in record:
            line["sentences"] = record["sentences"]
        if self.log_text and record.get("text") is not None:
            line["text"] = record["text"]
        text = json.dumps(line, ensure_ascii=False) + "\n"
        with self._lock:
            if self._fh is None:
                return
            try:
                self._fh.write(text)
                self._fh.flush()
            except (OSError, ValueError) as error:  # a full disk: the request is served anyway
                print(f"audiocpp serve: cannot write the access log: {error}", file=sys.stderr)

    def close(self) -> None:
        with self._lock:
            if self._fh is not None and self._fh is not sys.stdout:
                self._fh.close()
            self._fh = None


def client_address(client: Any) -> str | None:
    if not client:
        return None
    host, port = client[0], client[1] if len(client) > 1 else None
    return f"{host}:{port}" if port is not None else str(host)


def note(scope_state: dict[str, Any], **fields: Any) -> None:
    """Add to the audit record of the request whose scope state this is (``request.state``'s dict)."""
    scope_state.setdefault("audit", {}).update(fields)


def add_audio(scope_state: dict[str, Any], seconds: float, text: str | None = None) -> None:
    audit = scope_state.setdefault("audit", {})
    audit["audio_s"] = audit.get("audio_s", 0.0) + seconds
    if text is not None:
        audit["chars"] = audit.get("chars", 0) + len(text)
        audit["text"] = text if audit.get("text") is None else audit["text"] + " " + text
