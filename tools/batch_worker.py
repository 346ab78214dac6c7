#!/usr/bin/env python3
"""One weight type of ``tools/bench.py <family> --batch 1,2,4,8`` (tools/batch_bench.py runs it), in its
own process: load the package, warm up, then for each batch size B run B fixed-length requests one
after another (the baseline) and as one batch (``session.run_batch``), then B streaming requests as
one batch (``stream_batch``) for the time to first audio; print one JSON line.

    python tools/batch_worker.py FAMILY PACKAGE --batch 1,2,4,8 [--threads 2] [--compute-dtype auto]
           [--duration 5 --steps 16] [--patches 16] [--frames 48]

The codec's share is timed apart (its ``decode`` is wrapped), so the generation stage (tokens,
codes or latents before the codec) and end to end are both reported. Peak RSS is VmHWM reset
before each batch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script
    sys.path.append(str(REPO))
from tools import bench_requests  # noqa: E402
from tools.bench_common import cosine, reset_peak, status_bytes  # noqa: E402

#: Sentences of similar length (each request its own text and seed).
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "A light rain fell on the quiet harbour town.",
    "She opened the window and looked at the hills.",
    "Every morning the baker sings an old song.",
    "The train to the coast leaves at half past six.",
    "Two cats sleep in the sun by the garden wall.",
    "He wrote the letter slowly, one word at a time.",
    "The children ran down the path to the river.",
]


def requests(family: str, count: int, args: argparse.Namespace) -> list:
    """``count`` requests of the benchmark's fixed size, each its own text and seed."""
    from audiocpp.engine.records import TaskRequest

    language = "en-us" if family == "kokoro" else None  # Kokoro's length is the text's
    options = bench_requests.sized_options(family, args)
    return [TaskRequest(text=TEXTS[i % len(TEXTS)], seed=100 + i, options=dict(options), language=language)
            for i in range(count)]


def compare(family: str, alone: list, batch: list) -> dict:
    """How each batched result compares with the same request alone."""
    import numpy as np

    same, worst_diff, worst_cos = 0, 0.0, 1.0
    for a, b in zip(alone, batch):
        x, y = bench_requests.output_of(family, a), bench_requests.output_of(family, b)
        if x.shape == y.shape:
            if family in ("voxcpm2", "voxcpm1"):
                worst_diff = max(worst_diff, float(np.abs(x - y).max()))
            same += int(np.array_equal(x, y))
        sa, sb = a.audio.samples, b.audio.samples
        # silent pairs (no cosine) leave the worst as it is; a length mismatch makes it NaN
        worst_cos = min(worst_cos, cosine(sa, sb)) if sa.shape == sb.shape and sa.size else float("nan")
    return {"identical": same, "of": len(alone), "worst_latent_diff": worst_diff, "worst_cosine": worst_cos}


class CodecClock:
    """Seconds spent in the codec's ``decode`` (wrapped on the instance)."""

    def __init__(self, codec) -> None:
        self.seconds = 0.0
        inner = codec.decode

        def decode(*a, **k):
            start = time.perf_counter()
            try:
                return inner(*a, **k)
            finally:
                self.seconds += time.perf_counter() - start

        codec.decode = decode

    def take(self) -> float:
        value, self.seconds = self.seconds, 0.0
        return value


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("family", choices=["omnivoice", "voxcpm2", "voxcpm1", "audio8_tts"])
    ap.add_argument("path", type=Path)
    ap.add_argument("--batch", default="1,2,4,8")
    ap.add_argument("--threads", type=int, default=2)
    bench_requests.add_session_options(ap)
    bench_requests.add_request_size(ap)
    ap.add_argument("--no-stream", action="store_true", help="skip the streaming (first audio) runs")
    args = ap.parse_args(argv)
    import torch

    from audiocpp.engine import load

    torch.set_num_threads(args.threads)
    baseline = status_bytes("VmRSS")
    family = args.family
    model = load(args.path, family=family)
    options = bench_requests.session_options(args)
    session = model.session("tts", **options)
    streaming = model.session("tts", "streaming", **options) if not args.no_stream else None
    clock = CodecClock(bench_requests.codec_of(family, model))
    rss_loaded = status_bytes("VmRSS")
    sizes = [int(b) for b in args.batch.split(",")]
    warm = requests(family, 1, args)[0]
    session.run(warm)
    if streaming is not None:
        list(streaming.stream(warm))
    clock.take()
    rows = []
    for size in sizes:
        reqs = requests(family, size, args)
        start = time.perf_counter()
        alone = [session.run(r) for r in reqs]
        seq_wall, seq_codec = time.perf_counter() - start, clock.take()
        reset_peak()
        start = time.perf_counter()
        batch = session.run_batch(reqs)
        batch_wall, batch_codec = time.perf_counter() - start, clock.take()
        peak = status_bytes("VmHWM")
        row = {
            "batch": size, "audio_s": sum(r.audio.duration for r in batch),
            "seq_wall": seq_wall, "seq_codec": seq_codec,
            "batch_wall": batch_wall, "batch_codec": batch_codec,
            "seq_rtf": statistics.mean(r.metrics.rtf for r in alone),
            "batch_rtf": statistics.mean(r.metrics.rtf for r in batch),
            "batch_rows": statistics.mean(r.metrics.batch_rows for r in batch),
            "peak_rss": peak, **compare(family, alone, batch),
        }
        if streaming is not None:
            lone = streaming.run(reqs[0])
            stream = streaming.model.run_batch([(streaming, r) for r in reqs])
            clock.take()
            row["ttfa_alone"] = lone.metrics.time_to_first_audio_s
            row["ttfa_batch"] = [r.metrics.time_to_first_audio_s for r in stream]
        rows.append(row)
        print(json.dumps({"progress": row}), file=sys.stderr, flush=True)
    print(json.dumps({**bench_requests.worker_fields(family, args.path, session), "session_options": options,
                      "baseline_rss": baseline, "rss_loaded": rss_loaded, "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
