"""Record every synthesis result of a test run, to prove a change left numbers bit-identical.

``AUDIOCPP_RESULT_DUMP=DIR pytest ...`` wraps ``Session._stream`` for the run and writes, per test,
``DIR/<test id>.npz`` with every result's audio, streamed pieces and the numeric arrays of its
``details`` (tokens, codes, latents), in the order the test produced them.
``python -m tools.compare_dumps A B`` then lists the tests whose arrays differ in any bit.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

ENV = "AUDIOCPP_RESULT_DUMP"


def _arrays(prefix: str, value: Any, out: dict[str, np.ndarray]) -> None:
    if isinstance(value, np.ndarray) and value.dtype != object:
        out[prefix] = value
    elif hasattr(value, "numpy") and hasattr(value, "dtype"):  # a torch tensor
        out[prefix] = (value.detach().cpu().float().numpy() if value.is_floating_point()
                       else value.cpu().numpy())
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _arrays(f"{prefix}.{i}", item, out)
    elif isinstance(value, dict):
        for key, item in value.items():
            _arrays(f"{prefix}.{key}", item, out)
    elif isinstance(value, (int, float, bool, np.integer, np.floating)) and not isinstance(value, str):
        out[prefix] = np.asarray(value)


class ResultDump:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.current: str | None = None
        self.arrays: dict[str, np.ndarray] = {}
        self.count = 0

    def start(self, nodeid: str) -> None:
        self.current, self.arrays, self.count = nodeid, {}, 0

    def finish(self) -> None:
        if self.current and self.arrays:
            self.root.mkdir(parents=True, exist_ok=True)
            name = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.current)[:200]
            np.savez(self.root / f"{name}.npz", **self.arrays)
        self.current = None

    def record(self, result: Any, pieces: list[np.ndarray]) -> None:
        n = self.count
        self.count += 1
        self.arrays[f"{n}.audio"] = result.audio.samples
        for i, piece in enumerate(pieces):
            self.arrays[f"{n}.piece.{i}"] = piece
        _arrays(f"{n}.details", result.details, self.arrays)


def install() -> ResultDump | None:
    """Wrap ``Session._stream`` when ``AUDIOCPP_RESULT_DUMP`` is set; returns the recorder."""
    root = os.environ.get(ENV)
    if not root:
        return None
    from audiocpp.engine.session import Session

    dump = ResultDump(Path(root))
    original = Session._stream

    def recording(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        pieces: list[np.ndarray] = []
        for event in original(self, *args, **kwargs):
            if event.is_final:
                dump.record(event.result, pieces)
            elif event.audio is not None:
                pieces.append(event.audio.samples)
            yield event

    Session._stream = recording  # type: ignore[method-assign]
    return dump
