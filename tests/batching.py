"""Checks shared by the families' batching tests: a request gives in a batch what it gives alone.

``compare_rows(model, rows, outputs)`` runs every (session, request) row alone, then all of them as
one batch (``model.run_batch``), and compares each result with its lone run: the discrete outputs
(tokens, codes, stop steps) identical, continuous ones (latents) within ``latent_tol``, the audio of
the same length with cosine >= ``MIN_COSINE``. It returns the worst figures it saw (printed with
``-s``), so the closing numbers of a suite are on record.

``join_while_running(model, rows, ...)`` submits the rows to the model's batcher from threads at
staggered times (each joins the running batch at its next step) and compares the same way.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from audiocpp.engine.records import TaskRequest, TaskResult
from audiocpp.engine.session import Session

#: The bar of batched against lone results (float32): audio cosine.
MIN_COSINE = 0.9999

Outputs = Callable[[TaskResult], Sequence[np.ndarray]]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b / denom) if denom else float(np.array_equal(a, b))


@dataclass
class Report:
    rows: int = 0
    identical_outputs: int = 0
    bit_identical_audio: int = 0
    worst_cosine: float = 1.0
    worst_latent_diff: float = 0.0

    def __str__(self) -> str:
        return (f"{self.rows} rows: outputs identical {self.identical_outputs}/{self.rows}, "
                f"audio bit-identical {self.bit_identical_audio}/{self.rows}, "
                f"worst audio cosine {self.worst_cosine:.9f}, worst latent "
                f"|diff| {self.worst_latent_diff:.3g}")


def check_same(alone: TaskResult, batched: TaskResult, outputs: Outputs, report: Report, *,
               latent_tol: float | None = None, what: str = "") -> None:
    report.rows += 1
    a_out, b_out = list(outputs(alone)), list(outputs(batched))
    assert len(a_out) == len(b_out), f"{what}: {len(b_out)} outputs in the batch, {len(a_out)} alone"
    identical = True
    for x, y in zip(a_out, b_out):
        assert x.shape == y.shape, f"{what}: output shape {y.shape} in the batch, {x.shape} alone (stop step)"
        if latent_tol is None:
            assert np.array_equal(x, y), (
                f"{what}: {int((x != y).sum())} of {x.size} tokens differ from the lone run")
        else:
            diff = float(np.abs(x.astype(np.float64) - y.astype(np.float64)).max()) if x.size else 0.0
            report.worst_latent_diff = max(report.worst_latent_diff, diff)
            assert diff <= latent_tol, f"{what}: latents differ by {diff:.3g} from the lone run"
            identical = identical and bool(np.array_equal(x, y))
    report.identical_outputs += int(identical)
    a, b = alone.audio.samples, batched.audio.samples
    assert a.shape == b.shape, f"{what}: audio of {b.shape[0]} samples in the batch, {a.shape[0]} alone"
    report.bit_identical_audio += int(np.array_equal(a, b))
    cos = cosine(a, b)
    report.worst_cosine = min(report.worst_cosine, cos)
    assert cos >= MIN_COSINE, f"{what}: audio cosine {cos:.9f} against the lone run"


def compare_rows(model: Any, rows: list[tuple[Session, TaskRequest]], outputs: Outputs, *,
                 latent_tol: float | None = None, alone: list[TaskResult] | None = None) -> Report:
    """Every row alone, then all rows as one batch: the same outputs and audio."""
    alone = alone if alone is not None else [session.run(request) for session, request in rows]
    batch = model.run_batch(rows)
    assert len(batch) == len(rows) and batch.wall_s > 0
    report = Report()
    for i, (a, b) in enumerate(zip(alone, batch)):
        check_same(a, b, outputs, report, latent_tol=latent_tol, what=f"row {i}")
        assert b.metrics.seed == a.metrics.seed
    assert max(r.metrics.batch_rows for r in batch) > 1, "the rows never ran together"
    print(f"\nbatch against alone: {report}")
    return report


def join_while_running(model: Any, rows: list[tuple[Session, TaskRequest]], outputs: Outputs, *,
                       alone: list[TaskResult], gap_s: float = 0.05, max_batch: int = 8,
                       latent_tol: float | None = None) -> Report:
    """Rows submitted to ``model.executor()`` from threads, ``gap_s`` apart: each joins the batch
    that is running; every result is its lone run's."""
    batcher = model.executor(max_batch=max_batch)
    jobs: dict[int, Any] = {}

    def submit(i: int) -> None:
        time.sleep(i * gap_s)
        session, request = rows[i]
        jobs[i] = batcher.submit(request, session=session)

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(len(rows))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    report = Report()
    results = [jobs[i].result(timeout=600) for i in range(len(rows))]
    for i, (a, b) in enumerate(zip(alone, results)):
        check_same(a, b, outputs, report, latent_tol=latent_tol, what=f"joined row {i}")
    print(f"\njoined while running: {report}; mean rows per step "
          f"{', '.join(f'{r.metrics.batch_rows:.1f}' for r in results)}")
    return report
