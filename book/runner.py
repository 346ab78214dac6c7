"""Where the chunks are synthesized: in this process on the model's batcher, or on Ray; both through
``audiocpp batch``'s code (``batch.synth.Synthesizer``, ``batch.ray_runner.run_ray``), so a chunk is
built and run exactly as a batch item (and as ``audiocpp`` runs the same request).

Locally every chunk is submitted to the model's batcher in the order given: ``batch_size`` of them run
as rows of one batch and the next joins at the next decode step as one finishes, so the batch stays
full until the last chunks. On Ray, chunks go out in blocks of ``batch_size`` (each block one batch in
one actor) to ``workers`` actors, the chapters spread over the cluster as ``audiocpp batch`` spreads a
manifest.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from audiocpp.batch.manifest import Item
from audiocpp.batch.synth import Done, JobSpec

Record = Callable[[Item, Done], None]


class LocalRunner:
    """The model loaded in this process once, its batcher fed every chunk."""

    def __init__(self, job: JobSpec) -> None:
        self.job = job
        self.synth: Any = None

    def run(self, items: list[Item], record: Record, on_ready: Callable[[], None]) -> None:
        from audiocpp.batch.synth import Synthesizer, quiet_engine_warnings

        if self.synth is None:
            self.synth = Synthesizer(self.job)
        on_ready()
        with warnings.catch_warnings():
            quiet_engine_warnings()  # each chunk's warnings come back in its Done
            self.synth.run_many(items, "local", record)  # watched: Ctrl-C and SIGTERM cancel them

    def close(self) -> None:
        if self.synth is not None:
            self.synth.model.executor().close()  # cancels what is still queued or running


class RayRunner:
    """A Ray instance for the whole job (local, or the cluster at ``address``); each ``run`` is one
    ``audiocpp batch`` Ray job over the chunks."""

    def __init__(self, job: JobSpec, *, address: str | None, workers: int, num_cpus: float,
                 num_gpus: float) -> None:
        from audiocpp.batch.ray_runner import import_ray

        self.ray = import_ray()
        self.job = job
        self.options = {"address": address, "workers": workers, "num_cpus": num_cpus, "num_gpus": num_gpus}
        self.started = False

    def run(self, items: list[Item], record: Record, on_ready: Callable[[], None]) -> None:
        from audiocpp.batch.ray_runner import run_ray
        from audiocpp.engine.ray_cluster import connect

        if not self.started:
            self.started = connect(self.ray, self.options["address"])
        run_ray(self.job, items, record, on_ready, batch_size=self.job.batch_size, **self.options)

    def close(self) -> None:
        from audiocpp.engine.ray_cluster import disconnect

        disconnect(self.ray, self.started)
        self.started = False
