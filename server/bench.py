"""Server benchmark: concurrent clients against ``--max-batch 1`` and batched, side by side.

``python -m audiocpp.server.bench --model PATH [--clients 1,4,8,16] [--max-batch 1,8]
[--requests 2] [--option max_new_tokens=48 ...]`` starts one ``audiocpp serve`` per ``--max-batch``
value (all at once, so they load once and take turns), or measures running servers given with
``--url`` (one per ``--max-batch`` value, in the same order). For each client count, each server in
turn gets ``clients`` clients that each send ``--requests`` streaming requests back to back (fixed
options, so every request has the same length; seeds differ); printed per server:

- requests/s and seconds of audio per second of wall;
- latency (request sent to its last byte) and time to first audio (to its first audio byte), p50
  and p99;
- the ratio of requests/s against the first ``--max-batch`` value (the baseline) at that client count.

``--first-audio`` also times one long text offline against streamed (the first chunk), on the
first server. Text: a short sentence per request (``--text``).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

LONG_TEXT = (
    "The first light came over the hills before anyone in the village was awake. "
    "By the time the bakery opened, the fog had lifted from the river and the boats were out. "
    "Children ran along the harbour wall, counting the gulls and shouting at the waves. "
    "In the square, the old clock struck eight, a little late as always, and nobody minded."
)
TEXTS = ["The quick brown fox jumps over the lazy dog.", "A light rain fell on the quiet harbour town.",
         "She opened the window and looked at the hills.", "Every morning the baker sings an old song."]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def one_request(url: str, body: dict) -> dict[str, float]:
    """One streamed request: seconds to the first audio byte and to the last, and the audio seconds."""
    import httpx

    payload = {**body, "response_format": "pcm", "stream_format": "audio"}
    t0 = time.perf_counter()
    first, size = None, 0
    with httpx.stream("POST", url + "/v1/audio/speech", json=payload, timeout=1800) as r:
        if r.status_code != 200:
            r.read()
            raise RuntimeError(f"HTTP {r.status_code}: {r.text}")
        rate = int(r.headers.get("x-audiocpp-sample-rate", "24000"))
        for chunk in r.iter_raw():
            if chunk and first is None:
                first = time.perf_counter() - t0
            size += len(chunk)
    total = time.perf_counter() - t0
    return {"first": first if first is not None else total, "total": total, "audio_s": size / 2 / rate}


def clients_run(url: str, body: dict, clients: int, requests: int) -> dict[str, float]:
    """``clients`` clients, each sending ``requests`` requests back to back."""
    runs: list[dict[str, float]] = []
    errors: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients)

    def client(i: int) -> None:
        barrier.wait()
        for n in range(requests):
            try:
                run = one_request(url, {**body, "input": TEXTS[(i + n) % len(TEXTS)], "seed": 1000 * i + n})
            except RuntimeError as error:
                with lock:
                    errors.append(str(error))
                continue
            with lock:
                runs.append(run)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise SystemExit(f"{len(errors)} requests failed: {errors[0]}")
    totals = sorted(r["total"] for r in runs)
    firsts = sorted(r["first"] for r in runs)
    return {"requests": len(runs), "wall_s": wall, "requests_per_s": len(runs) / wall,
            "audio_per_s": sum(r["audio_s"] for r in runs) / wall,
            "latency_p50": _quantile(totals, 0.5), "latency_p99": _quantile(totals, 0.99),
            "first_p50": _quantile(firsts, 0.5), "first_p99": _quantile(firsts, 0.99)}


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return values[min(len(values) - 1, max(0, int(round(q * (len(values) - 1)))))]


def start_server(models: list[str], max_batch: int, clients: int, extra: list[str]) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    exe = Path(sys.executable).parent / "audiocpp"
    voices = tempfile.mkdtemp(prefix="audiocpp-bench-voices-")
    cmd = [str(exe), "serve", "--port", str(port), "--voices-dir", voices, "--max-batch", str(max_batch),
           "--max-concurrency", str(max(max_batch, clients)), "--max-queue", str(max(16, clients)), *extra]
    for model in models:
        cmd += ["--model", model]
    return subprocess.Popen(cmd, stderr=subprocess.DEVNULL, env=os.environ.copy()), f"http://127.0.0.1:{port}"


def wait_ready(url: str, proc: subprocess.Popen | None) -> list[dict]:
    import httpx

    deadline = time.perf_counter() + 1800
    while True:
        try:
            return httpx.get(url + "/v1/models", timeout=5).json()["data"]
        except (httpx.HTTPError, KeyError):
            if time.perf_counter() > deadline or (proc is not None and proc.poll() is not None):
                raise SystemExit("the server did not start") from None
            time.sleep(0.5)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m audiocpp.server.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--url", action="append", default=[], help="running servers, one per --max-batch value")
    parser.add_argument("--model", action="append", default=[], help="--model for the started servers")
    parser.add_argument("--name", help="the model field of requests (default: the server's first model)")
    parser.add_argument("--clients", default="1,4,8,16", help="comma-separated client counts")
    parser.add_argument("--max-batch", default="1,8", help="comma-separated --max-batch values; the first is the baseline")
    parser.add_argument("--requests", type=int, default=2, help="requests per client")
    parser.add_argument("--option", action="append", default=[], help="request option key=value (repeatable)")
    parser.add_argument("--serve-arg", action="append", default=[], help="extra argument for the started servers")
    parser.add_argument("--first-audio", action="store_true", help="also time a long text offline vs streamed")
    args = parser.parse_args(argv)

    options: dict[str, object] = {}
    for item in args.option:
        key, _, value = item.partition("=")
        options[key] = value
    counts = [int(c) for c in args.clients.split(",")]
    batches = [int(b) for b in args.max_batch.split(",")]
    procs: list[subprocess.Popen] = []
    urls = list(args.url)
    if urls and len(urls) != len(batches):
        raise SystemExit("give one --url per --max-batch value")
    if not urls:
        for max_batch in batches:
            proc, url = start_server(args.model, max_batch, max(counts), args.serve_arg)
            procs.append(proc)
            urls.append(url)
    try:
        models = [wait_ready(url, procs[i] if procs else None) for i, url in enumerate(urls)]
        name = args.name or models[0][0]["id"]
        body = {"model": name, **options}
        for url in urls:  # warm-up: first touch of the weights, kernel set-up
            one_request(url, {**body, "input": "Warm up.", "seed": 0})
        print(f"model {name} ({models[0][0]['family']}), options {options or '-'}, {args.requests} streaming "
              f"requests per client, servers with --max-batch {', '.join(map(str, batches))}")
        print(f"{'clients':>7s} {'max-batch':>9s} {'req/s':>7s} {'audio s/s':>9s} {'latency p50/p99 s':>18s} "
              f"{'first audio p50/p99 s':>22s} {'vs baseline':>11s}")
        for clients in counts:
            rows = [clients_run(url, body, clients, args.requests) for url in urls]
            for max_batch, row in zip(batches, rows):
                ratio = row["requests_per_s"] / rows[0]["requests_per_s"]
                print(f"{clients:7d} {max_batch:9d} {row['requests_per_s']:7.3f} {row['audio_per_s']:9.3f} "
                      f"{row['latency_p50']:8.2f} / {row['latency_p99']:<8.2f} {row['first_p50']:9.2f} / "
                      f"{row['first_p99']:<10.2f} {ratio:10.2f}x", flush=True)
        if args.first_audio:
            long = {**body, "input": LONG_TEXT, "seed": 1}
            streamed = one_request(urls[0], long)
            print(f"first audio of a {len(LONG_TEXT)}-character text, streamed: {streamed['first']:.3f} s "
                  f"(whole response {streamed['total']:.3f} s)")
    finally:
        for proc in procs:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
