"""The batch's progress bar (items, rate, ETA) on stderr, and its closing summary."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class BatchProgress:
    """One redrawn line: ``batch [####....] 5/12 0.81 items/s ETA 0:09 1 failed``.

    Shown when ``stream`` is a terminal (or ``enabled`` is True). The rate counts items
    finished in this run since the first one started, so model loading does not skew the ETA.
    """

    def __init__(self, total: int, *, enabled: bool | None = None, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.total = total
        self.finished = 0
        self.failed = 0
        self._t0: float | None = None
        self._drawn = False

    def start(self) -> None:
        """Synthesis begins (the workers have loaded the model)."""
        if self._t0 is None:
            self._t0 = time.perf_counter()
            self._draw()

    def advance(self, ok: bool) -> None:
        self.start()
        self.finished += 1
        self.failed += 0 if ok else 1
        self._draw()

    def line(self) -> str:
        width = 24
        frac = min(self.finished / self.total, 1.0) if self.total else 1.0
        bar = "#" * int(frac * width)
        elapsed = time.perf_counter() - (self._t0 or time.perf_counter())
        rate = self.finished / elapsed if elapsed > 0 and self.finished else 0.0
        eta = _clock((self.total - self.finished) / rate) if rate > 0 else "?"
        failed = f" {self.failed} failed" if self.failed else ""
        return f"batch [{bar.ljust(width)}] {self.finished}/{self.total} {rate:.2f} items/s ETA {eta}{failed}"

    def _draw(self) -> None:
        if not self.enabled:
            return
        self.stream.write("\r\033[K" + self.line())
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self.enabled and self._drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._drawn = False
