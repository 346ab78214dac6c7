"""The same manifest with `--ray`, on a real local Ray instance started by the batch itself:
the same files byte for byte, the same rows apart from timings, and no Ray process left."""

from __future__ import annotations

import time
from pathlib import Path

from .common import ray_processes
from .conftest import DEMO_FLAGS, Run, run_batch

TIMINGS = ("wall_s", "rtf")


def test_ray_gives_the_local_outputs(demo_run: Run, demo_inputs: Path, tmp_path: Path,
                                     cache_env: dict[str, str]) -> None:
    before = ray_processes()
    # Two actors of one CPU each (one torch thread, as the local run), two items per actor call.
    run = run_batch(demo_inputs / "manifest.jsonl", tmp_path / "out", *DEMO_FLAGS, "--ray", "--workers", "2",
                    "--num-cpus", "1", "--batch-size", "2", env=cache_env)
    assert run.proc.returncode == 1, run.proc.stderr  # the bad item, as locally
    assert "a local Ray instance" in run.proc.stderr and "Traceback" not in run.proc.stderr
    local_rows, ray_rows = demo_run.rows, run.rows
    assert [r["id"] for r in ray_rows] == [r["id"] for r in local_rows]
    for local, remote in zip(local_rows, ray_rows):
        assert {k: v for k, v in remote.items() if k not in TIMINGS} == \
            {k: v for k, v in local.items() if k not in TIMINGS}
        if local["status"] == "ok":
            assert remote["wall_s"] > 0
            assert (run.out / remote["output"]).read_bytes() == (demo_run.out / local["output"]).read_bytes()
    assert sorted(p.name for p in run.out.iterdir()) == sorted(p.name for p in demo_run.out.iterdir())
    stats = run.summary
    assert (stats["done"], stats["failed"]) == (demo_run.summary["done"], demo_run.summary["failed"])
    assert float(stats["batch_rows"]) > 1  # each actor call ran its block as one batch
    deadline = time.monotonic() + 30
    while ray_processes() - before and time.monotonic() < deadline:
        time.sleep(0.5)
    assert ray_processes() - before == set(), "the batch left Ray processes running"


def test_one_actor_body_loads_once_and_keeps_a_load_failure(tmp_path: Path) -> None:
    """``engine.ray_cluster.ModelActor``, the body of ``batch --ray``'s actors and of ``serve --ray``'s
    replicas, in this process: the demo model loaded once and run on its executor (the model's own, as a
    single server's); a model that does not load is kept, not raised (Ray would restart the actor over
    and over), and a batch actor puts it in every row for the driver to raise as the local path does."""
    import numpy as np
    import pytest

    from audiocpp.batch.ray_runner import SynthActor, decode
    from audiocpp.batch.synth import JobSpec, raise_load_failure
    from audiocpp.engine.errors import UsageError
    from audiocpp.engine.ray_cluster import ModelActor
    from audiocpp.engine.records import TaskRequest

    actor = ModelActor(None, "omnivoice", {})
    assert actor.failure is None and actor.demo and actor.node_id() == ""
    assert actor.model is not None
    request = TaskRequest.from_inputs("One actor.", seed=3, options={"num_inference_steps": 2})
    assert actor.model.executor(1).submit(request).result(timeout=120).audio.samples.size > 0

    broken = SynthActor(JobSpec(family="omnivoice", model_path=str(tmp_path / "missing")).to_json())
    assert broken.model is None and broken.synth is None and broken.failure is not None
    rows = broken({"item": np.array(["{}", "{}"], dtype=object)})
    done = [decode({key: column[i] for key, column in rows.items()}) for i in range(2)]
    assert all(d.audio is None and d.worker == broken.name for d in done)
    with pytest.raises(UsageError, match="does not exist"):
        raise_load_failure(done[0].row["load_error"])
