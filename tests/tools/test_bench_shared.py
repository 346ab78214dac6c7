"""The pieces the benchmarks share (tools/bench_common.py, bench_sides.py, bench_requests.py): the
alternating rounds, pooling processes, the table and its ratio lines, a side's timing loop, the
fixed requests, and every family's command line still parsing. Benchmarks are not tests: these check
the tools' plumbing, never a speed."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools import bench_common, bench_requests, bench_sides

REPO = Path(__file__).resolve().parents[2]


def record(walls: list[float], ttfa: list[float] | None = None, **extra) -> dict:
    return {"walls": walls, "ttfa": ttfa or [], "load_s": 1.0, "audio_s": 2.0, "peak_rss_gen_mb": 1024.0,
            **extra}


def test_alternate_takes_turns_and_swaps_the_order_every_round() -> None:
    order: list[str] = []
    sides = {name: (lambda name=name: order.append(name) or {"n": len(order)}) for name in ("a", "b", "c")}
    seen = []
    runs = bench_sides.alternate(sides, 2, report=lambda r, side, run: seen.append((r, side)))
    assert order == ["a", "b", "c", "a", "b", "c"]
    assert [run["n"] for run in runs["a"]] == [1, 4] and seen[3] == (1, "a")
    order.clear()
    bench_sides.alternate(sides, 3, swap=True)
    assert order == ["a", "b", "c", "c", "b", "a", "a", "b", "c"]


def test_merge_pools_every_process_and_keeps_the_worst_rss() -> None:
    merged = bench_common.merge([record([1.0, 3.0], [0.5], peak_rss_gen_mb=100.0),
                                 record([2.0], peak_rss_gen_mb=300.0)])
    assert merged["walls"] == [1.0, 3.0, 2.0] and merged["ttfa"] == [0.5]
    assert merged["peak_rss_gen_mb"] == 300.0 and merged["process_medians"] == [2.0, 2.0]
    assert bench_common.spread([1.0, 3.0, 2.0]).split() == ["2.00", "s", "(1.00..3.00)"]
    assert bench_common.ratio([1.0, 2.0, 3.0], [4.0]) == 0.5


def test_print_sides_prints_the_table_and_the_ratios_of_the_medians(capsys: pytest.CaptureFixture) -> None:
    rows = {"upstream": record([4.0, 4.2], [4.0], codes="x"), "ours": record([2.0, 2.1], [1.0], codes="x")}
    bench_sides.print_sides("a setting", rows, extra=("codes", lambda r: r["codes"]),
                            note=lambda a, b: "; same" if a["codes"] == b["codes"] else "")
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "== a setting"
    assert out[2].split()[:6] == ["side", "wall", "median", "(min..max)", "RTF", "first"]
    assert out[2].endswith("codes")
    assert out[4].startswith("ours ") and "1.00 GiB" in out[4] and out[4].endswith("  x")
    assert out[5] == "ratio ours/upstream: wall 0.500, first audio 0.250; same"


def test_print_sides_leaves_out_first_audio_where_no_side_streams(capsys: pytest.CaptureFixture) -> None:
    rows = {"ours": record([1.0]), "ort": record([2.0]), "hexgrad": record([4.0])}
    pairs = [("ours", "ort"), ("ours", "hexgrad"), ("ours", "gone")]
    bench_sides.print_sides("2 threads", rows, ratios=pairs)
    out = capsys.readouterr().out.splitlines()
    assert "first audio" not in out[2]
    assert out[-2:] == ["ratio ours/ort: wall 0.500", "ratio ours/hexgrad: wall 0.250"]


def test_measure_side_times_loading_the_runs_and_the_first_audio() -> None:
    calls: list[str] = []
    side = {"size": 0}

    def run(s: dict) -> tuple[float, int]:
        calls.append("run")
        return 1.5, 7

    def first_audio(s: dict) -> float:
        calls.append("first")
        events = iter([("partial", 1), ("final", 2)])
        return bench_common.first_audio_time(events, lambda e: e[0] == "partial")

    rec, last = bench_common.measure_side(lambda: side, run, 3, warm_up=lambda s: calls.append("warm"),
                                          first_audio=first_audio)
    assert calls == ["warm", "run", "run", "run", "first", "first", "first"]
    assert last == (1.5, 7) and len(rec["walls"]) == 3 and len(rec["ttfa"]) == 3
    assert rec["load_s"] >= 0 and all(t >= 0 for t in rec["ttfa"])
    assert math.isnan(bench_common.first_audio_time(iter([])))


def test_size_flags_and_thread_counts() -> None:
    assert bench_sides.size_or(["--patches", "8"], "--patches", 8, 16) == ["--patches", "8"]
    assert bench_sides.size_or(["--patches=8"], "--patches", 8, 16) == ["--patches", "8"]
    assert bench_sides.size_or(["--frames", "8"], "--patches", 4, 16) == ["--patches", "16"]
    assert bench_sides.thread_counts("2,1") == [2, 1]


def test_every_family_asks_for_a_fixed_length_request() -> None:
    assert bench_requests.request_options("voxcpm1", patches=3)["min_tokens"] == 3
    assert bench_requests.request_options("voxcpm2", patches=3)["max_tokens"] == 3
    assert bench_requests.request_options("audio8_tts", frames=5) == {"max_new_tokens": 5}
    assert bench_requests.request_options("omnivoice", duration=2.0, steps=4)["num_inference_steps"] == 4
    assert bench_requests.request_options("kokoro") == {"voice": "jf_alpha"}


def test_an_isa_level_this_cpu_lacks_is_refused() -> None:
    with pytest.raises(SystemExit, match="not a level"):
        bench_common.isa_levels("avx9")
    assert bench_common.isa_levels("all")
    assert bench_common.level_env(None) == dict(os.environ)


@pytest.mark.parametrize("family", ["kokoro", "omnivoice", "voxcpm2", "voxcpm1", "audio8_tts"])
def test_every_family_bench_parses_its_command_line(family: str) -> None:
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "bench.py"), family, "--help"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "--repeats" in proc.stdout and "--threads" in proc.stdout
