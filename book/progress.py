"""The book's progress bar on stderr (tqdm): characters synthesized, audio seconds made, the real-time
factor so far and the ETA. Off with ``--quiet`` or when stderr is not a terminal."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO


class BookProgress:
    def __init__(
        self, total_chars: int, *, enabled: bool | None = None, stream: TextIO | None = None
    ) -> None:
        self.stream = stream or sys.stderr
        if enabled is None:
            try:
                enabled = bool(self.stream.isatty())
            except (AttributeError, ValueError):
                enabled = False
        self.enabled = enabled and total_chars > 0
        self.total = total_chars
        self.audio_s = 0.0
        self.started: float | None = None
        self._bar: Any = None

    def start(self) -> None:
        """Synthesis begins (the model is loaded): the clock of the real-time factor starts."""
        if self.started is None:
            self.started = time.perf_counter()
        if self.enabled and self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(
                total=self.total,
                unit="char",
                unit_scale=True,
                file=self.stream,
                leave=False,
                dynamic_ncols=True,
                mininterval=0.2,
                desc="book",
                bar_format="{desc} {bar} {n_fmt}/{total_fmt} chars {postfix} ETA {remaining}",
            )

    def advance(self, chars: int, audio_s: float) -> None:
        self.start()
        self.audio_s += audio_s
        if self._bar is not None:
            self._bar.set_postfix_str(self.postfix(), refresh=False)
            self._bar.update(chars)

    def postfix(self) -> str:
        elapsed = time.perf_counter() - (self.started or time.perf_counter())
        rtf = f"{elapsed / self.audio_s:.2f}" if self.audio_s > 0 else "?"
        return f"{self.audio_s:.0f} s audio, RTF {rtf}"

    def close(self) -> None:
        if self._bar is not None:
            if self.audio_s > 0:  # drawn at the end: the last chunks often end within one redraw interval
                self._bar.refresh()
            self._bar.close()
            self._bar = None
