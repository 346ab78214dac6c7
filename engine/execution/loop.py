"""The batch loop: rows (one request each) advanced together, their ops run in groups.

One thread drives a :class:`BatchLoop` holding the model's guard; the loop itself takes no locks. Each
:meth:`BatchLoop.step` advances every row not waiting on an op until it yields an op, an audio piece
(so rows of a family without ops still stream, taking turns) or ends; then runs the waiting ops, one
call per group of equal type and :meth:`Op.group_key`. A request is prepared on its row's first
advance, so a bad one fails alone; a group whose batched call fails is run again op by op.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Generator, Hashable, Iterator
from typing import Any, Protocol

from ..batching.ops import Op
from ..errors import AudiocppWarning
from ..metrics import Stopwatch, peak_rss_mb
from ..nn.kernels.cpu_isa import level as cpu_level
from ..progress import Progress
from ..records import (
    AudioBuffer,
    AudioPiece,
    Metrics,
    PreparedRequest,
    StreamEvent,
    Synthesis,
    TaskRequest,
    TaskResult,
)
from ..tasks import Mode, Task
from .jobs import Cancelled, RowEvent


class RowSession(Protocol):
    """What the loop needs of a session (engine/session.py's ``Session``)."""

    task: Task
    mode: Mode

    def prepare(self, request: TaskRequest, *, progress: Progress | None = None) -> PreparedRequest: ...

    def program(self, request: PreparedRequest) -> Generator[Any, Any, Synthesis]: ...


class BatchResults(list):
    """``run_batch``'s results, in request order, with the batch's own wall time."""

    wall_s: float = 0.0


class _Row:
    def __init__(self, key: Hashable, session: RowSession, request: TaskRequest | PreparedRequest,
                 progress: Progress | None, queued_s: float) -> None:
        self.key, self.session, self.request = key, session, request
        self.progress, self.queued_s = progress, queued_s
        self.clock = Stopwatch()
        self.prepared: PreparedRequest | None = request if isinstance(request, PreparedRequest) else None
        self.program: Any = None
        self.pending: Op | None = None
        self.send: Any = None
        self.first_audio: float | None = None
        self.pieces = self.groups = self.rows_seen = 0  # audio pieces; op groups run, and their rows
        self.why: Cancelled | None = None  # set: cancelled
        self.warnings: list[str] = []

    def close(self) -> None:
        if self.program is not None:
            self.program.close()
            self.program = None
        if self.prepared is not None:
            self.prepared.progress.close()


class BatchLoop:
    """Rows of one model's sessions, stepped together (see the module docstring)."""

    def __init__(self, on_group: Callable[[int], None] | None = None) -> None:
        self._rows: list[_Row] = []
        self.on_group = on_group  # called with the size of every op group run (a server's histogram)

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, key: Hashable, session: RowSession, request: TaskRequest | PreparedRequest, *,
            progress: Progress | None = None, queued_s: float = 0.0) -> None:
        """A new row; it joins at the next :meth:`step`. ``request`` may already be prepared
        (``session.prepare``: its checks and warnings then happened in the caller)."""
        self._rows.append(_Row(key, session, request, progress, queued_s))

    def cancel(self, key: Hashable, why: Cancelled | None = None) -> None:
        """Stop the row ``key`` at the next step (its program is closed; others go on); it ends with
        ``why`` (a plain :class:`Cancelled` by default)."""
        for row in self._rows:
            if row.key == key:
                row.why = why or Cancelled()

    def close(self) -> None:
        """Close every row's program (nothing is emitted)."""
        rows, self._rows = self._rows, []
        for row in rows:
            row.close()

    # -- one step ----------------------------------------------------------------------------
    def step(self) -> Iterator[RowEvent]:
        """Advance the rows, then run their ops; yields events as they happen."""
        for row in list(self._rows):
            if row.why is not None:
                yield self._drop(row, row.why)
            elif row.pending is None:
                yield from self._advance(row)
        groups: dict[tuple[type, Hashable], list[_Row]] = {}
        for row in self._rows:
            if row.pending is not None:
                groups.setdefault((type(row.pending), row.pending.group_key()), []).append(row)
        for rows in groups.values():
            yield from self._run_group(rows)

    def _advance(self, row: _Row) -> Iterator[RowEvent]:
        try:
            if row.program is None:
                if row.prepared is None:
                    row.prepared = self._prepare(row)
                row.program = row.session.program(row.prepared)
            send, row.send = row.send, None
            item = row.program.send(send)
        except StopIteration as stop:
            yield self._finish(row, stop.value)
            return
        except Exception as error:  # noqa: BLE001 - the row's own failure, reported to its caller
            yield self._drop(row, error)
            return
        if isinstance(item, Op):
            row.pending = item
            return
        words = []
        if isinstance(item, AudioPiece):
            item, words = item.audio, item.words
        if not isinstance(item, AudioBuffer):
            yield self._drop(row, TypeError(f"{type(row.session).__name__}._synthesize yielded "
                                            f"{type(item).__name__}; it yields AudioBuffer pieces and Ops"))
            return
        if row.first_audio is None:
            row.first_audio = row.clock.elapsed()
        index = row.pieces
        row.pieces += 1
        yield RowEvent(row.key, StreamEvent(kind="audio", index=index, audio=item, name=f"chunk_{index}",
                                            words=list(words)))

    @staticmethod
    def _prepare(row: _Row) -> PreparedRequest:
        """The row's request prepared; its engine warnings (a reference cut at the cap) are kept
        for its result, and issued as they would be without a batch (the CLI's ``warning:`` lines;
        a caller that filters them out still finds them in ``TaskResult.warnings``)."""
        recorded: list[warnings.WarningMessage] = []
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", AudiocppWarning)
                try:
                    return row.session.prepare(row.request, progress=row.progress)
                finally:
                    recorded = list(caught)
        finally:
            row.warnings = [str(w.message) for w in recorded if issubclass(w.category, AudiocppWarning)]
            for w in recorded:  # through the caller's filters again ("ignore" drops them)
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)

    def _run_group(self, rows: list[_Row]) -> Iterator[RowEvent]:
        ops = [row.pending for row in rows]
        try:
            results = type(ops[0]).run_group(ops)
            if len(results) != len(ops):
                raise RuntimeError(f"{type(ops[0]).__name__}.run_group returned {len(results)} results "
                                   f"for {len(ops)} ops")
        except Exception as error:  # noqa: BLE001
            if len(rows) == 1:
                yield self._drop(rows[0], error)
                return
            for row in rows:  # find the row that fails; the others get their results
                yield from self._run_group([row])
            return
        if self.on_group is not None:
            self.on_group(len(rows))
        for row, result in zip(rows, results):
            row.pending, row.send = None, result
            row.groups += 1
            row.rows_seen += len(rows)

    # -- leaving ------------------------------------------------------------------------------
    def _remove(self, row: _Row) -> None:
        if row in self._rows:
            self._rows.remove(row)
        row.close()

    def _drop(self, row: _Row, error: BaseException) -> RowEvent:
        self._remove(row)
        return RowEvent(row.key, error=error)

    def _finish(self, row: _Row, synthesis: Any) -> RowEvent:
        self._remove(row)
        if not isinstance(synthesis, Synthesis):
            return RowEvent(row.key, error=TypeError(
                f"{type(row.session).__name__}._synthesize must return a Synthesis, got {synthesis!r}"))
        wall = row.clock.elapsed()
        assert row.prepared is not None
        metrics = Metrics(
            wall_s=wall,
            audio_s=synthesis.audio.duration,
            time_to_first_audio_s=row.first_audio if row.first_audio is not None else wall,
            peak_rss_mb=peak_rss_mb(),
            seed=row.prepared.seed,
            num_chunks=max(1, len(synthesis.chunks) or row.pieces),
            queued_s=row.queued_s,
            batch_rows=row.rows_seen / row.groups if row.groups else 1.0,
            compute=getattr(getattr(row.session, "compute", None), "name", ""),
            cpu_isa=cpu_level(),
        )
        result = TaskResult(audio=synthesis.audio, task=row.session.task, mode=row.session.mode,
                            chunks=synthesis.chunks, metrics=metrics, voice_prompt=synthesis.voice_prompt,
                            details=synthesis.details, warnings=row.warnings, words=list(synthesis.words))
        return RowEvent(row.key, StreamEvent(kind="final", index=row.pieces, audio=synthesis.audio,
                                             name="final", result=result))
