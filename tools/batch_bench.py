"""``--batch 1,2,4,8`` of the family benchmarks: throughput of batched generation against the same
requests run one after another, at the real dimensions with random weights, in the same run.

For each weight type (default ``q8_0``, the fastest mode here, and ``f32``, the exact mode) one
worker process (``tools/batch_worker.py``) loads the package and, for each batch size B, runs B
fixed-length requests (different texts and seeds) one after another, then as one batch, then as one
streaming batch. Printed per B, as ratios to the sequential baseline of the same B:

- throughput: seconds of audio per second of wall, end to end and for the generation stage alone
  (wall minus the codec's decode time, timed apart);
- per-request RTF (each result's own wall / its audio) and time to first audio (streaming: a lone
  request, and the batch's median and worst);
- peak RSS of the batch (VmHWM above the process baseline) against the model loaded;
- exactness: how many batched results have the tokens / codes / latents of the same request alone,
  the worst latent difference and the worst audio cosine.

Packages come from tools/weights_bench.py (``<bench dir>/<family>-<type>.gguf``, made once).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from tools.bench_common import free_gib
from tools.weights_bench import compute_of, each_package, run_tool_worker


def run(family: str, folder: Path, *, batch: str = "1,2,4,8", weights: str = "q8_0,f32", threads: int = 2,
        worker_args: list[str] | None = None, stream: bool = True, label: str | None = None) -> list[dict]:
    """Package ``folder`` in each weight type, run the batch worker on each (batch sizes ``batch``; the
    family's request size in ``worker_args``: --frames, --patches...; ``stream``: also the first-audio
    runs), print the table."""
    results = []
    for kind, path in each_package(label or family, folder, weights, family=family):
        print(f"{kind}: {path.name}; available memory {free_gib():.1f} GiB", file=sys.stderr, flush=True)
        args = ["--batch", batch, "--threads", str(threads), "--compute-dtype", compute_of(kind),
                *(worker_args or []), *([] if stream else ["--no-stream"])]
        results.append({**run_tool_worker("batch_worker.py", family, path, args), "weights": kind})
        print_table(label or family, results[-1])
    return results


def print_table(name: str, r: dict) -> None:
    gib = 2**30
    options = r.get("session_options", {})
    extra = "".join(f", {k}={v}" for k, v in options.items() if k != "compute_dtype")
    print(f"\n== {name}, {r['weights']} (compute {r['compute_dtype']}{extra}), real-size dims, "
          f"random weights, {r['threads']} thread(s); ratios against the same B requests one after another")
    print(f"{'B':>3s} {'audio s':>7s} {'seq wall':>9s} {'batch wall':>10s} {'throughput':>10s} "
          f"{'gen stage':>9s} {'codec seq/batch s':>17s} {'RTF/request seq->batch':>23s} "
          f"{'first audio alone->batch med/max':>33s} {'peak RSS':>9s} {'exact':>14s}")
    for row in r["rows"]:
        e2e = row["seq_wall"] / row["batch_wall"]
        gen = (row["seq_wall"] - row["seq_codec"]) / max(1e-9, row["batch_wall"] - row["batch_codec"])
        ttfa = "n/a"
        if "ttfa_batch" in row:
            ttfa = (f"{row['ttfa_alone']:.2f} -> {statistics.median(row['ttfa_batch']):.2f}/"
                    f"{max(row['ttfa_batch']):.2f} s")
        exact = f"{row['identical']}/{row['of']}"
        if row["worst_latent_diff"]:
            exact += f" d{row['worst_latent_diff']:.1e}"
        exact += f" cos{row['worst_cosine']:.5f}"
        print(f"{row['batch']:3d} {row['audio_s']:7.1f} {row['seq_wall']:8.2f}s {row['batch_wall']:9.2f}s "
              f"{e2e:9.2f}x {gen:8.2f}x {row['seq_codec']:8.2f}/{row['batch_codec']:<8.2f} "
              f"{row['seq_rtf']:10.2f} -> {row['batch_rtf']:<9.2f} {ttfa:>33s} "
              f"{(row['peak_rss'] - r['baseline_rss']) / gib:8.2f}G {exact:>14s}")
    print(f"model loaded: {(r['rss_loaded'] - r['baseline_rss']) / gib:.2f} GiB above the baseline; "
          f"load average {r['loadavg']}")
    sys.stdout.flush()
