"""`audiocpp batch` on local worker processes with the demo model, as a real subprocess: the
CLI's audio for every seeded item, a bad item reported while the others finish, voices
prepared once, and a run interrupted (Ctrl-C, or the driver killed) then resumed."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from tests.support import cli_path, read_wav, sigint_restored

from .common import cli_output, group_members, read_rows, summary, write_manifest
from .conftest import DEMO_DEFAULTS, DEMO_FLAGS, DEMO_ITEMS, Run, run_batch


def test_rows_and_files(demo_run: Run) -> None:
    proc = demo_run.proc
    assert proc.returncode == 1, proc.stderr  # one item failed; the others are done
    assert "error: 1 of 8 items failed; the others are done" in proc.stderr
    rows = {row["id"]: row for row in demo_run.rows}
    assert list(rows) == [item["id"] for item in DEMO_ITEMS]  # one row each, in the manifest's order
    bad = rows.pop("bad")
    assert bad["status"] == "error" and "broken.wav" in bad["error"] and bad["output"] is None
    assert bad["seed"] == 41
    for row in rows.values():
        assert set(row) == {"id", "status", "error", "output", "audio_s", "wall_s", "rtf", "seed", "words"}
        assert row["status"] == "ok" and row["error"] is None
        audio, rate = read_wav(demo_run.out / row["output"])
        assert rate == 24000 and abs(len(audio) / rate - row["audio_s"]) < 1e-3
        assert row["rtf"] == pytest.approx(row["wall_s"] / row["audio_s"], rel=1e-2)
    assert rows["t1"]["seed"] == 11 and rows["c2"]["seed"] == 22
    assert rows["d1"]["output"] == "d1.flac" and rows["t1"]["output"] == "t1.wav"
    assert sorted(p.name for p in demo_run.out.iterdir()) == sorted(
        [f"{i}.wav" for i in ("t1", "t2", "t3", "c1", "c2", "c3")] + ["d1.flac", "manifest.jsonl"])
    stats = demo_run.summary
    assert (stats["items"], stats["done"], stats["failed"], stats["skipped"]) == ("8", "7", "1", "0")
    assert float(stats["audio_h"]) * 3600 == pytest.approx(sum(r["audio_s"] for r in rows.values()), abs=0.5)
    # c1 and c2 share a voice: two distinct references, each prepared once.
    assert stats["voices_prepared"] == "2"


@pytest.mark.parametrize("item_id", ["t1", "t2", "c1", "d1"])
def test_items_equal_the_cli(item_id: str, demo_run: Run, demo_inputs: Path, tmp_path: Path) -> None:
    """The same request through `audiocpp` (one torch thread, as the batch's worker) gives the same file."""
    item = next(i for i in DEMO_ITEMS if i["id"] == item_id)
    row = next(r for r in demo_run.rows if r["id"] == item_id)
    out = cli_output(item, demo_inputs, DEMO_DEFAULTS, ["--family", "omnivoice", "--session-option",
                                                        "omnivoice.threads=1"], tmp_path / row["output"])
    assert out.read_bytes() == (demo_run.out / row["output"]).read_bytes()


def test_rerun_skips_finished_items_and_retries_failed_ones(demo_run: Run, demo_inputs: Path,
                                                            tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    for path in demo_run.out.iterdir():
        (out / path.name).write_bytes(path.read_bytes())
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir() if p.suffix != ".jsonl"}
    again = run_batch(demo_inputs / "manifest.jsonl", out, *DEMO_FLAGS, "--threads", "1")
    assert again.proc.returncode == 1
    stats = again.summary
    assert (stats["done"], stats["skipped"], stats["failed"]) == ("0", "7", "1")
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir() if p.suffix != ".jsonl"} == before
    assert [r["id"] for r in again.rows] == [i["id"] for i in DEMO_ITEMS]


TTS_ITEMS = [{"id": f"line{n:02d}", "text": f"Sentence number {n} of a longer batch, read aloud.", "seed": n}
             for n in range(12)]
TTS_FLAGS = ["--family", "omnivoice", "--request-option", "num_inference_steps=4", "--workers", "2",
             "--threads", "1", "--no-progress"]


def _start(manifest: Path, out: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "AUDIOCPP_DEBUG"}
    return subprocess.Popen([str(cli_path()), "batch", str(manifest), "--out-dir", str(out), *TTS_FLAGS],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True, preexec_fn=sigint_restored)


def _wait_for_rows(proc: subprocess.Popen[str], manifest: Path, count: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if manifest.exists() and len(manifest.read_text().splitlines()) >= count:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError(f"fewer than {count} rows after {timeout} s")


def _wait_gone(pgid: int, timeout: float = 60) -> list[int]:
    deadline = time.monotonic() + timeout
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    return group_members(pgid)


@pytest.mark.parametrize("how", ["ctrl-c", "driver-killed"])
def test_interrupted_run_resumes_each_item_exactly_once(how: str, tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "manifest.jsonl", TTS_ITEMS)
    out = tmp_path / "out"
    proc = _start(manifest, out)
    _wait_for_rows(proc, out / "manifest.jsonl", 3)
    if how == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends the whole foreground group
    else:
        os.kill(proc.pid, signal.SIGKILL)  # a crash: the workers must notice and exit by themselves
    stdout, stderr = proc.communicate(timeout=120)
    if how == "ctrl-c":
        assert proc.returncode == 130, stderr
        assert "batch interrupted" in stderr and "rerun the same command to resume" in stderr
        assert "Traceback" not in stderr
    else:
        assert proc.returncode == -signal.SIGKILL
    assert _wait_gone(proc.pid) == [], "worker processes outlived the batch"

    first = {row["id"]: row for row in read_rows(out / "manifest.jsonl")}
    finished = {item_id for item_id, row in first.items() if row["status"] == "ok"}
    assert 3 <= len(finished) < len(TTS_ITEMS)
    for item_id in finished:  # a row that says ok always has its whole file
        audio, rate = read_wav(out / f"{item_id}.wav")
        assert abs(len(audio) / rate - first[item_id]["audio_s"]) < 1e-3

    resumed = _start(manifest, out)
    stdout, stderr = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, stderr
    stats = summary(stdout)
    assert int(stats["skipped"]) == len(finished)
    assert int(stats["done"]) == len(TTS_ITEMS) - len(finished)  # nothing done twice
    rows = read_rows(out / "manifest.jsonl")
    assert [row["id"] for row in rows] == [item["id"] for item in TTS_ITEMS]
    assert all(row["status"] == "ok" for row in rows)
    for item_id in finished:  # kept from the first run, not redone
        assert next(r for r in rows if r["id"] == item_id)["wall_s"] == first[item_id]["wall_s"]
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted([f"{item['id']}.wav" for item in TTS_ITEMS] + ["manifest.jsonl"])  # no temporaries
    for row in rows:
        audio, rate = read_wav(out / row["output"])
        assert abs(len(audio) / rate - row["audio_s"]) < 1e-3 and np.isfinite(audio).all()
    if how == "ctrl-c":  # once more, every item done: no figure without something to measure
        again = _start(manifest, out)
        stdout, stderr = again.communicate(timeout=600)
        assert again.returncode == 0, stderr
        stats = summary(stdout)
        assert int(stats["skipped"]) == len(TTS_ITEMS) and "load_s" not in stats and "rtf" not in stats
        assert "items_per_s" not in stats  # nothing was run: no rate of 0.000
        assert all(line.split("=", 1)[1] for line in stdout.splitlines() if "=" in line), stdout


def test_a_model_that_does_not_load_stops_the_job_with_its_error(tmp_path: Path) -> None:
    from audiocpp.families.omnivoice.demo import write_demo

    model = tmp_path / "broken"
    write_demo(model)
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    manifest = write_manifest(tmp_path / "m.jsonl", TTS_ITEMS[:2])
    run = run_batch(manifest, tmp_path / "out", "--model", model)
    assert run.proc.returncode == 1
    assert "error: " in run.proc.stderr and "is not a valid safetensors file" in run.proc.stderr
    assert "Traceback" not in run.proc.stderr and "internal error" not in run.proc.stderr
    assert not (tmp_path / "out" / "manifest.jsonl").exists()


def test_batch_size_one_gives_the_batched_files(demo_run: Run, demo_inputs: Path, tmp_path: Path,
                                                cache_env: dict[str, str]) -> None:
    """The default run's items shared their steps (batches of up to 8); one at a time gives the same
    bytes, and the same rows apart from timings."""
    assert float(demo_run.summary["batch_rows"]) > 1.5
    run = run_batch(demo_inputs / "manifest.jsonl", tmp_path / "out", *DEMO_FLAGS, "--threads", "1",
                    "--batch-size", "1", env=cache_env)
    assert run.proc.returncode == 1 and run.summary["batch_rows"] == "1.00"
    for batched, alone in zip(demo_run.rows, run.rows):
        assert {k: v for k, v in batched.items() if k not in ("wall_s", "rtf")} == \
            {k: v for k, v in alone.items() if k not in ("wall_s", "rtf")}
        if alone["status"] == "ok":
            assert (run.out / alone["output"]).read_bytes() == (demo_run.out / batched["output"]).read_bytes()


def test_sigterm_stops_the_run_as_ctrl_c_does(tmp_path: Path) -> None:
    """SIGTERM to the driver alone (a service manager's stop): the finished items are kept, one line
    says so, exit 143, and no worker outlives it (issue 46: one cancellation path)."""
    manifest = write_manifest(tmp_path / "manifest.jsonl", TTS_ITEMS)
    out = tmp_path / "out"
    proc = _start(manifest, out)
    _wait_for_rows(proc, out / "manifest.jsonl", 2)
    os.kill(proc.pid, signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    assert "batch terminated: " in stderr and "rerun the same command to resume" in stderr
    assert "Traceback" not in stderr and stderr.count("terminated") == 1
    assert _wait_gone(proc.pid) == [], "worker processes outlived the batch"
    rows = read_rows(out / "manifest.jsonl")
    assert all(row["status"] == "ok" for row in rows) and 2 <= len(rows) < len(TTS_ITEMS)
    written = sorted(p.name for p in out.iterdir())
    assert written == sorted([f"{r['id']}.wav" for r in rows] + ["manifest.jsonl"])  # no temporaries


def test_a_timeout_fails_the_items_that_take_longer(tmp_path: Path) -> None:
    items = TTS_ITEMS[:3]
    manifest = write_manifest(tmp_path / "manifest.jsonl", items)
    run = run_batch(manifest, tmp_path / "out", "--family", "omnivoice", "--threads", "1", "--no-progress",
                    "-r", "num_inference_steps=64", "--timeout", "0.05")
    assert run.proc.returncode == 1, run.proc.stderr
    assert [row["status"] for row in run.rows] == ["error"] * 3
    assert all(row["error"] == "the deadline of 0.05 s passed" for row in run.rows), run.rows
    assert "internal error" not in run.proc.stderr and "Traceback" not in run.proc.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["manifest.jsonl"]
    bad = run_batch(manifest, tmp_path / "out2", "--family", "omnivoice", "--timeout", "0")
    assert bad.proc.returncode == 2 and "--timeout 0 must be more than 0 seconds" in bad.proc.stderr


def test_a_worker_that_dies_fails_the_items_it_held_and_is_replaced(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "manifest.jsonl", TTS_ITEMS)
    out = tmp_path / "out"
    proc = _start(manifest, out)
    _wait_for_rows(proc, out / "manifest.jsonl", 2)
    workers = [pid for pid in group_members(proc.pid) if pid != proc.pid
               and b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert len(workers) == 2, workers
    os.kill(workers[0], signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 1, stderr  # the run goes on; the lost items are its failures
    rows = read_rows(out / "manifest.jsonl")
    assert [row["id"] for row in rows] == [item["id"] for item in TTS_ITEMS]
    failed = [row for row in rows if row["status"] == "error"]
    assert 1 <= len(failed) <= 2, rows  # what the killed worker held (--batch-size: 1 on the CPU)
    for row in failed:
        assert "the worker process audiocpp-worker-" in row["error"], row
        assert "died while it held this item (exit code -9)" in row["error"], row
    assert int(summary(stdout)["done"]) == len(TTS_ITEMS) - len(failed)  # the replacement did the rest
    assert _wait_gone(proc.pid) == [], "worker processes outlived the batch"
