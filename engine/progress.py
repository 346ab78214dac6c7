"""The progress bar on stderr (tqdm), shown only when stderr is a terminal."""

from __future__ import annotations

import sys
from typing import Any, TextIO


class Progress:
    """Counts steps of a long job and draws a tqdm bar on stderr.

    Families call :meth:`start` with the number of steps of a stage and :meth:`advance`
    after each; nothing is printed when stderr is not a TTY or ``enabled`` is False. The bar
    disappears when the stage is closed (:meth:`close`, or the next :meth:`start`).
    """

    def __init__(self, enabled: bool | None = None, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = _isatty(self.stream) if enabled is None else enabled
        self.label = ""
        self.total = 0
        self.done = 0
        self._bar: Any = None

    def start(self, label: str, total: int) -> None:
        self.close()
        self.label, self.total, self.done = label, max(int(total), 0), 0
        if self.enabled and self.total > 0:
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, desc=label, file=self.stream, leave=False, dynamic_ncols=True,
                             mininterval=0.1, bar_format="{desc} {bar} {n_fmt}/{total_fmt} {elapsed}")

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class NullProgress(Progress):
    def __init__(self) -> None:
        super().__init__(enabled=False)
