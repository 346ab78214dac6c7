"""Server benchmark: first-audio latency (streaming vs offline) and requests/s at saturation.

``python -m audiocpp.server.bench`` starts ``audiocpp serve`` (the demo model unless
``--model`` is given) on a free local port, or measures a running server with ``--url``:

- first audio: the time from sending a request to the first audio byte received, for the
  same long text sent offline (``response_format=pcm``: the whole take arrives at once) and
  streamed (``stream_format=audio``: the first chunk arrives as soon as it is decoded);
- saturation: ``--clients`` clients send short requests back to back for ``--seconds``;
  completed requests per second, and the median latency.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
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
    "In the square, the old clock struck eight, a little late as always, and nobody minded. "
    "The market filled with voices: fish and bread, apples and cheese, news from the city. "
    "Later that morning a letter arrived for the schoolteacher, and she read it twice. "
    "It said that the bridge would finally be repaired before winter, and the whole town cheered. "
    "That evening they lit lanterns along the quay and told stories until the tide came in."
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def first_audio(url: str, body: dict, stream: bool) -> tuple[float, float]:
    """(seconds to the first audio byte, seconds to the last) for one request."""
    import httpx

    payload = {**body, "response_format": "pcm", **({"stream_format": "audio"} if stream else {})}
    t0 = time.perf_counter()
    first = None
    with httpx.stream("POST", url + "/v1/audio/speech", json=payload, timeout=600) as r:
        if r.status_code != 200:
            r.read()
            raise RuntimeError(f"HTTP {r.status_code}: {r.text}")
        for chunk in r.iter_raw():
            if chunk and first is None:
                first = time.perf_counter() - t0
    return (first if first is not None else float("nan")), time.perf_counter() - t0


def saturate(url: str, body: dict, clients: int, seconds: float) -> dict[str, float]:
    import httpx

    latencies: list[float] = []
    refused = [0]
    lock = threading.Lock()
    stop = time.perf_counter() + seconds

    def client(i: int) -> None:
        with httpx.Client(timeout=600) as http:
            n = 0
            while time.perf_counter() < stop:
                t0 = time.perf_counter()
                r = http.post(url + "/v1/audio/speech", json={**body, "seed": i * 100000 + n})
                n += 1
                with lock:
                    if r.status_code == 200:
                        latencies.append(time.perf_counter() - t0)
                    else:
                        refused[0] += 1

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return {"requests": len(latencies), "refused": refused[0], "wall_s": wall,
            "requests_per_s": len(latencies) / wall,
            "median_latency_s": statistics.median(latencies) if latencies else float("nan")}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m audiocpp.server.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="a running server (default: start `audiocpp serve` here)")
    parser.add_argument("--model", action="append", default=[], help="--model for the started server")
    parser.add_argument("--name", help="the model field of requests (default: the server's first model)")
    parser.add_argument("--repeats", type=int, default=3, help="latency runs per mode (median reported)")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--max-concurrency", type=int, default=2)
    parser.add_argument("--short-text", default="Hello there, this is a short request.")
    parser.add_argument("--option", action="append", default=[], help="request option key=value (repeatable)")
    args = parser.parse_args(argv)

    options: dict[str, object] = {}
    for item in args.option:
        key, _, value = item.partition("=")
        options[key] = value
    proc = None
    url = args.url
    if url is None:
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        exe = Path(sys.executable).parent / "audiocpp"
        voices = tempfile.mkdtemp(prefix="audiocpp-bench-voices-")
        cmd = [str(exe), "serve", "--port", str(port), "--voices-dir", voices,
               "--max-concurrency", str(args.max_concurrency), "--max-queue", str(max(8, args.clients))]
        for model in args.model:
            cmd += ["--model", model]
        proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL, env=os.environ.copy())
    try:
        import httpx

        deadline = time.perf_counter() + 600
        while True:
            try:
                models = httpx.get(url + "/v1/models", timeout=5).json()["data"]
                break
            except (httpx.HTTPError, KeyError):
                if time.perf_counter() > deadline or (proc is not None and proc.poll() is not None):
                    raise SystemExit("the server did not start") from None
                time.sleep(0.5)
        name = args.name or models[0]["id"]
        body = {"model": name, "input": LONG_TEXT, "seed": 1, **options}
        first_audio(url, {**body, "input": "Warm up."}, stream=False)
        print(f"model {name} ({models[0]['family']}), long text {len(LONG_TEXT)} chars, options {options or '-'}")
        for stream in (False, True):
            runs = [first_audio(url, body, stream) for _ in range(args.repeats)]
            fa = statistics.median(r[0] for r in runs)
            total = statistics.median(r[1] for r in runs)
            label = "streaming (stream_format=audio)" if stream else "offline"
            print(f"  first audio, {label:32s}: {fa:7.3f} s   (whole response {total:7.3f} s, median of {len(runs)})")
        short = {"model": name, "input": args.short_text, "response_format": "wav", **options}
        result = saturate(url, short, args.clients, args.seconds)
        print(f"  saturation, {args.clients} clients x {args.seconds:g} s, --max-concurrency {args.max_concurrency}: "
              f"{result['requests_per_s']:.2f} requests/s ({result['requests']:.0f} done, "
              f"{result['refused']:.0f} refused), median latency {result['median_latency_s']:.3f} s")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
