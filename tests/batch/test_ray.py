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
