"""A minimal progress bar on stderr, shown only when stderr is a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Counts steps of a long job and redraws one line on stderr.

    Families call :meth:`start` with the number of steps of a stage and :meth:`advance`
    after each; nothing is printed when stderr is not a TTY or ``enabled`` is False.
    """

    def __init__(self, enabled: bool | None = None, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.label = ""
        self.total = 0
        self.done = 0
        self._t0 = time.perf_counter()
        self._drawn = False

    def start(self, label: str, total: int) -> None:
        self.label, self.total, self.done = label, max(int(total), 0), 0
        self._t0 = time.perf_counter()
        self._draw()

    def advance(self, n: int = 1) -> None:
        self.done += n
        self._draw()

    def close(self) -> None:
        if self.enabled and self._drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._drawn = False

    def _draw(self) -> None:
        if not self.enabled or self.total <= 0:
            return
        width = 30
        frac = min(self.done / self.total, 1.0)
        bar = "#" * int(frac * width)
        elapsed = time.perf_counter() - self._t0
        self.stream.write(
            f"\r\033[K{self.label} [{bar.ljust(width)}] {self.done}/{self.total} {elapsed:5.1f}s"
        )
        self.stream.flush()
        self._drawn = True


class NullProgress(Progress):
    def __init__(self) -> None:
        super().__init__(enabled=False)
