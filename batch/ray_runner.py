"""The same batch on Ray Data: ``map_batches`` with a stateful actor class holding the model.

Items go into the dataset as JSON strings, one block per run of at most ``batch_size`` items
that share a voice (so a block's voice is prepared once, in one actor), in the local order; an
actor submits each block to its model's executor at once (its items rows of one forward pass).
Each actor loads the model once (``ActorPoolStrategy(size=workers)``, ``num_cpus`` and
``num_gpus`` per actor) and returns every item's row and its samples as bytes; the driver
writes the files and the manifest as blocks come back, exactly as the local path does. So the
model path, voice references and saved voices must be readable at the same paths on every
node, and audiocpp must be installed there; the outputs land on the driver's machine.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from audiocpp.engine.errors import AudiocppError
from audiocpp.engine.ray_cluster import ModelActor, connect, disconnect
from audiocpp.engine.records import AudioBuffer

from .local import voice_runs
from .manifest import Item
from .synth import (
    Done,
    JobSpec,
    Synthesizer,
    load_failure,
    quiet_engine_warnings,
    raise_load_failure,
    use_threads,
)

Record = Callable[[Item, Done], None]


def import_ray():
    """``ray`` and ``ray.data``, or a UsageError naming the extra that installs them."""
    from audiocpp.engine.ray_cluster import import_ray as load

    return load("--ray and --ray-address", ("ray.data",), "Ray Data")


class SynthActor(ModelActor):
    """A Ray Data actor: each block of items submitted at once to the model's executor
    (``Synthesizer.run_many``); a model that does not load is reported in the rows (the driver raises
    it as the local path does)."""

    def __init__(self, job_json: str) -> None:
        quiet_engine_warnings()  # each item's warnings come back in its row
        job = JobSpec.from_json(job_json)
        use_threads(job)
        super().__init__(Path(job.model_path), job.family, job.load_options)  # a path, not a hub name
        self.synth = Synthesizer(job, self.model) if self.model is not None else None

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self.synth is None:
            failure = load_failure(self.failure) if self.failure is not None else None
            done = [Done({"load_error": failure}, worker=self.name) for _ in batch["item"]]
        else:
            # the block is one batch: its items are rows of one forward pass
            done = self.synth.run_many([Item.from_json(str(text)) for text in batch["item"]],
                                       worker=self.name)
        return {
            "done": np.array([d.to_json() for d in done], dtype=object),
            "samples": np.array([b"" if d.audio is None else
                                 np.ascontiguousarray(d.audio.samples, dtype=np.float32).tobytes()
                                 for d in done], dtype=object),
            "rate": np.array([0 if d.audio is None else d.audio.sample_rate for d in done], dtype=np.int64),
        }


def decode(result: Mapping[str, Any]) -> Done:
    """One row of what :class:`SynthActor` returns, back into the item's Done (on the driver)."""
    audio = None
    if result["rate"]:
        audio = AudioBuffer(np.frombuffer(result["samples"], dtype=np.float32), int(result["rate"]))
    return Done.from_json(str(result["done"]), audio)


def run_ray(job: JobSpec, items: list[Item], record: Record, on_ready: Callable[[], None], *,
            address: str | None, workers: int, num_cpus: float, num_gpus: float, batch_size: int) -> None:
    """Synthesize ``items`` on a local Ray instance (``address`` None) or an existing cluster."""
    ray = import_ray()
    import pyarrow as pa
    from ray.data import ActorPoolStrategy, DataContext

    started_here = connect(ray, address)
    try:
        logging.getLogger("ray.data").setLevel(logging.ERROR)
        context = DataContext.get_current()
        context.enable_progress_bars = False
        context.print_on_execution_start = False
        by_item = {item.id: item for item in items}
        tables = [pa.table({"item": [item.to_json() for item in chunk]})
                  for chunk in voice_runs(items, batch_size)]
        dataset = ray.data.from_arrow(tables).map_batches(
            SynthActor,
            fn_constructor_kwargs={"job_json": job.to_json()},
            compute=ActorPoolStrategy(size=workers),
            num_cpus=num_cpus,
            num_gpus=num_gpus or None,
            batch_size=batch_size,
            batch_format="numpy",
        )
        for index, result in enumerate(dataset.iter_rows()):
            if index == 0:
                on_ready()
            done = decode(result)
            if "load_error" in done.row:
                raise_load_failure(done.row["load_error"])
            record(by_item[done.row["id"]], done)
    except AudiocppError:
        raise
    except Exception as error:
        raise _explain(error) from None
    finally:
        disconnect(ray, started_here)


def _explain(error: Exception) -> Exception:
    """A Ray failure as the audiocpp error inside it when there is one."""
    cause: BaseException | None = error
    for _ in range(10):
        if cause is None or isinstance(cause, AudiocppError):
            return cause or error
        cause = getattr(cause, "cause", None) or cause.__cause__
    return error
