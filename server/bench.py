"""Server benchmark: concurrent clients against ``--max-batch 1`` and batched, side by side.

``python -m audiocpp.server.bench --model PATH [--clients 1,4,8,16] [--max-batch 1,8]
[--requests 2] [--option max_new_tokens=48 ...]`` starts one ``audiocpp serve`` per ``--max-batch``
value (all at once, so they load once and take turns), or measures running servers given with
``--url`` (one per ``--max-batch`` value, in the same order). For each client count, each server in
turn gets ``clients`` clients that each send ``--requests`` streaming requests back to back (fixed
options, so every request has the same length; seeds differ; ``--offline``: plain POSTs, each
synthesized offline and sent whole); printed per server:

- requests/s and seconds of audio per second of wall;
- latency (request sent to its last byte) and time to first audio (to its first audio byte), p50
  and p99;
- the ratio of requests/s against the first ``--max-batch`` value (the baseline) at that client count.

``--rounds N`` measures every client count N times, the servers' order reversed every other round
(a host whose speed drifts then favours neither), and ends with each ratio's median and range.

``--first-audio`` also times one long text offline against streamed (the first chunk), on the
first server. Text: a short sentence per request (``--text``).

``--text-in`` times text streamed *in*, as a voice agent's LLM writes its reply (``--chars-per-s``,
a few characters per delta): the first sentence's audio over ``WS /v1/audio/speech/stream`` and over
Wyoming's streaming synthesis (the started server gets a ``--wyoming-port``), against a plain POST
that must wait for the whole reply. Printed: seconds from the end of the first sentence to its first
audio, for each (the POST's includes the wait for the rest of the reply). Each way hangs up at its
first audio, which cancels the rest of it on the server.

``--soak N`` runs N requests of every kind (mixed formats, clients that leave mid-stream, voice uploads;
server/soak.py) against one server (the first ``--max-batch`` value; ``--url`` with ``--pid``) from
``--soak-clients`` clients, and prints its internal errors, its threads and file descriptors after the
warm-up and at the end, and its resident memory curve.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
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


def one_request(url: str, body: dict, *, first_only: bool = False, stream: bool = True) -> dict[str, float]:
    """One request: seconds to the first audio byte and to the last, and the audio seconds
    (``first_only``: hang up at the first audio, which cancels the rest on the server). Streamed
    (``stream_format=audio``: the family's streaming mode), or with ``stream=False`` a plain POST
    (offline synthesis: the whole body comes at the end)."""
    import httpx

    payload = {**body, "response_format": "pcm"}
    if stream:
        payload["stream_format"] = "audio"
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
                if first_only:
                    break
            size += len(chunk)
    total = time.perf_counter() - t0
    return {"first": first if first is not None else total, "total": total, "audio_s": size / 2 / rate}


def clients_run(url: str, body: dict, clients: int, requests: int, *,
                stream: bool = True) -> dict[str, float]:
    """``clients`` clients, each sending ``requests`` requests back to back (:func:`one_request`)."""
    runs: list[dict[str, float]] = []
    errors: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients)

    def client(i: int) -> None:
        barrier.wait()
        for n in range(requests):
            try:
                run = one_request(url, {**body, "input": TEXTS[(i + n) % len(TEXTS)], "seed": 1000 * i + n},
                                  stream=stream)
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


async def _write_reply(text: str, chars_per_s: float, send: Callable[[str], Awaitable[None]],
                       finish: Callable[[], Awaitable[None]], reader: Callable[[float], Awaitable[float]],
                       ) -> dict[str, float]:
    """Write ``text`` a few characters at a time at ``chars_per_s`` through ``send`` (then
    ``finish``) while ``reader(t0)`` waits for the first audio and returns its time; stops writing
    once it has come. Seconds from t0 to the end of the first sentence and to the first audio."""
    sentence_end = text.index(". ") + 1  # the first sentence's end, where the chunker cuts
    t0 = time.perf_counter()
    task = asyncio.ensure_future(reader(t0))
    sentence_at, sent = None, 0
    for i in range(0, len(text), 4):
        piece = text[i:i + 4]
        await send(piece)
        sent += len(piece)
        if sentence_at is None and sent >= sentence_end:
            sentence_at = time.perf_counter() - t0
        await asyncio.sleep(len(piece) / chars_per_s)
        if task.done():
            break
    else:
        await finish()
    first = await asyncio.wait_for(task, timeout=1800)
    assert sentence_at is not None
    return {"sentence_at": sentence_at, "first": first}


async def _ws_text_in(url: str, body: dict, text: str, chars_per_s: float) -> dict[str, float]:
    import json

    import websockets

    config = {key: value for key, value in body.items() if key != "input"}
    config.update(type="session.config", response_format="pcm")
    async with websockets.connect(url.replace("http", "ws") + "/v1/audio/speech/stream", max_size=None) as ws:
        await ws.send(json.dumps(config))

        async def reader(t0: float) -> float:
            async for message in ws:
                if isinstance(message, bytes):  # hanging up after it cancels the rest
                    return time.perf_counter() - t0
                if json.loads(message)["type"] == "error":
                    raise RuntimeError(message)
            raise RuntimeError("the server closed the socket before any audio")

        async def send(piece: str) -> None:
            await ws.send(json.dumps({"type": "input.text", "text": piece}))

        async def finish() -> None:
            await ws.send(json.dumps({"type": "input.done"}))

        return await _write_reply(text, chars_per_s, send, finish, reader)


async def _wyoming_text_in(port: int, voice: str, text: str, chars_per_s: float) -> dict[str, float]:
    from wyoming.audio import AudioChunk
    from wyoming.client import AsyncTcpClient
    from wyoming.error import Error
    from wyoming.tts import SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeVoice

    async with AsyncTcpClient("127.0.0.1", port) as client:
        async def reader(t0: float) -> float:
            while (event := await client.read_event()) is not None:
                if Error.is_type(event.type):
                    raise RuntimeError(Error.from_event(event).text)
                if AudioChunk.is_type(event.type):  # hanging up after it cancels the rest
                    return time.perf_counter() - t0
            raise RuntimeError("the server closed the connection before any audio")

        async def send(piece: str) -> None:
            await client.write_event(SynthesizeChunk(text=piece).event())

        async def finish() -> None:
            await client.write_event(SynthesizeStop().event())

        await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name=voice)).event())
        return await _write_reply(text, chars_per_s, send, finish, reader)


def text_in_run(url: str, wyoming_port: int | None, body: dict, chars_per_s: float, repeats: int) -> None:
    """The first sentence's audio, text streamed in, over each way in (medians of ``repeats``)."""
    text = LONG_TEXT
    written = len(text) / chars_per_s
    sentence = (text.index(". ") + 1) / chars_per_s
    ways: dict[str, list[float]] = {"POST (whole reply)": [], "WS /v1/audio/speech/stream": []}
    if wyoming_port is not None:
        ways["Wyoming synthesize-chunk"] = []
    for _ in range(repeats):  # alternated, so drift hits every way alike
        post = one_request(url, {**body, "input": text}, first_only=True)
        ways["POST (whole reply)"].append(written - sentence + post["first"])
        ws = asyncio.run(_ws_text_in(url, body, text, chars_per_s))
        ways["WS /v1/audio/speech/stream"].append(ws["first"] - ws["sentence_at"])
        if wyoming_port is not None:
            wy = asyncio.run(_wyoming_text_in(wyoming_port, body["model"], text, chars_per_s))
            ways["Wyoming synthesize-chunk"].append(wy["first"] - wy["sentence_at"])
    print(f"text streamed in at {chars_per_s:g} characters/s ({len(text)} characters, the first sentence "
          f"written after {sentence:.1f} s, the whole reply after {written:.1f} s); seconds from the end "
          f"of the first sentence to its first audio, median (min-max) of {repeats}:")
    for way, values in ways.items():
        values = sorted(values)
        print(f"  {way:30s} {_quantile(values, 0.5):7.2f} ({values[0]:.2f}-{values[-1]:.2f})")


def start_server(models: list[str], max_batch: int, clients: int, extra: list[str],
                 voices: str) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    exe = Path(sys.executable).parent / "audiocpp"
    # --max-batch-force: the batch size compared is the one given, also where the family measured batching
    # not to pay (the server would cap it)
    cmd = [str(exe), "serve", "--port", str(port), "--voices-dir", voices, "--max-batch", str(max_batch),
           "--max-batch-force", "--quiet", "--max-concurrency", str(max(max_batch, clients)),
           "--max-queue", str(max(16, clients)), *extra]
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


def soak_run(args: argparse.Namespace, options: dict[str, object], max_batch: int) -> None:
    """``--soak``: one server (started here, or ``--url`` and ``--pid``), the soak, its figures."""
    from .soak import soak

    if args.url and args.pid is None:
        raise SystemExit("--soak with --url needs the server's --pid (its /proc is read)")
    voices = tempfile.TemporaryDirectory(prefix="audiocpp-soak-voices-")
    proc = None
    if args.url:
        url, pid = args.url[0], args.pid
    else:
        proc, url = start_server(args.model, max_batch, args.soak_clients, list(args.serve_arg), voices.name)
        pid = proc.pid
    try:
        name = args.name or wait_ready(url, proc)[0]["id"]
        report = asyncio.run(soak(url, pid, args.soak, {"model": name, **options}, clients=args.soak_clients))
        print("\n".join(report.lines()))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
        voices.cleanup()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m audiocpp.server.bench",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--url", action="append", default=[],
                        help="running servers, one per --max-batch value")
    parser.add_argument("--model", action="append", default=[], help="--model for the started servers")
    parser.add_argument("--name", help="the model field of requests (default: the server's first model)")
    parser.add_argument("--clients", default="1,4,8,16", help="comma-separated client counts ('' for none)")
    parser.add_argument("--max-batch", default="1,8",
                        help="comma-separated --max-batch values; the first is the baseline")
    parser.add_argument("--labels", help="with --url: comma-separated names of the servers for the table "
                        "(default: their --max-batch values), e.g. single,ray-1,ray-2")
    parser.add_argument("--requests", type=int, default=2, help="requests per client")
    parser.add_argument("--rounds", type=int, default=1,
                        help="runs of every client count, the servers' order alternating from round to "
                             "round; with more than one, the ratios' median and range are printed")
    parser.add_argument("--option", action="append", default=[], help="request option key=value (repeatable)")
    parser.add_argument("--serve-arg", action="append", default=[],
                        help="extra argument for the started servers")
    parser.add_argument("--offline", action="store_true",
                        help="clients send plain POSTs (offline synthesis, the whole body at the end) "
                             "instead of streaming requests")
    parser.add_argument("--first-audio", action="store_true",
                        help="also time a long text offline vs streamed")
    parser.add_argument("--text-in", action="store_true",
                        help="time text streamed in (WS, Wyoming) against a POST of the whole reply")
    parser.add_argument("--chars-per-s", type=float, default=60.0,
                        help="--text-in: how fast the reply is written")
    parser.add_argument("--repeats", type=int, default=3, help="--text-in: runs of each way")
    parser.add_argument("--wyoming-port", type=int,
                        help="--text-in with --url: the running server's Wyoming port")
    parser.add_argument("--soak", type=int, default=0,
                        help="run a soak of this many requests instead (server/soak.py)")
    parser.add_argument("--soak-clients", type=int, default=8, help="--soak: clients at once")
    parser.add_argument("--pid", type=int, help="--soak with --url: the running server's process id")
    args = parser.parse_args(argv)

    options: dict[str, object] = {}
    for item in args.option:
        key, _, value = item.partition("=")
        options[key] = value
    counts = [int(c) for c in args.clients.split(",") if c]
    if args.soak:
        soak_run(args, options, int(args.max_batch.split(",")[0]))
        return
    batches = [int(b) for b in args.max_batch.split(",")]
    procs: list[subprocess.Popen] = []
    urls = list(args.url)
    if urls and len(urls) != len(batches):
        raise SystemExit("give one --url per --max-batch value")
    labels = args.labels.split(",") if args.labels else [str(b) for b in batches]
    if len(labels) != len(batches):
        raise SystemExit("give one --labels name per server")
    wyoming_port = args.wyoming_port
    voices = tempfile.TemporaryDirectory(prefix="audiocpp-bench-voices-")
    if not urls:
        for i, max_batch in enumerate(batches):
            extra = list(args.serve_arg)
            if args.text_in and i == 0:
                wyoming_port = _free_port()
                extra += ["--wyoming-port", str(wyoming_port)]
            proc, url = start_server(args.model, max_batch, max(counts, default=1), extra, voices.name)
            procs.append(proc)
            urls.append(url)
    try:
        models = [wait_ready(url, procs[i] if procs else None) for i, url in enumerate(urls)]
        name = args.name or models[0][0]["id"]
        body = {"model": name, **options}
        for url in urls:  # warm-up, in the measured mode: first touch of the weights, its session
            one_request(url, {**body, "input": "Warm up.", "seed": 0}, stream=not args.offline)
        kind = "offline" if args.offline else "streaming"
        print(f"model {name} ({models[0][0]['family']}), options {options or '-'}, {args.requests} {kind} "
              f"requests per client, servers with --max-batch {', '.join(map(str, batches))}")
        if args.text_in:
            text_in_run(urls[0], wyoming_port, body, args.chars_per_s, args.repeats)
        if counts:
            column = "server" if args.labels else "max-batch"
            print(f"{'clients':>7s} {column:>9s} {'req/s':>7s} {'audio s/s':>9s} "
                  f"{'latency p50/p99 s':>18s} {'first audio p50/p99 s':>22s} {'vs baseline':>11s}"
                  + ("  round" if args.rounds > 1 else ""))
        ratios: dict[tuple[int, int], list[float]] = {}
        for round_ in range(args.rounds):
            for clients in counts:
                order = list(range(len(urls)))
                if round_ % 2:  # alternate which server goes first: a drifting host favours neither
                    order.reverse()
                measured = {i: clients_run(urls[i], body, clients, args.requests, stream=not args.offline)
                            for i in order}
                rows = [measured[i] for i in range(len(urls))]
                for label, row in zip(labels, rows):
                    ratio = row["requests_per_s"] / rows[0]["requests_per_s"]
                    ratios.setdefault((clients, label), []).append(ratio)
                    print(f"{clients:7d} {label:>9s} {row['requests_per_s']:7.3f} "
                          f"{row['audio_per_s']:9.3f} {row['latency_p50']:8.2f} / {row['latency_p99']:<8.2f} "
                          f"{row['first_p50']:9.2f} / {row['first_p99']:<10.2f} {ratio:10.2f}x"
                          + (f"  {round_ + 1}" if args.rounds > 1 else ""), flush=True)
        if args.rounds > 1:
            print("requests/s against the baseline, median (range) of the rounds:")
            for (clients, label), values in ratios.items():
                if label != labels[0]:
                    values = sorted(values)
                    print(f"  {clients} clients, {label if args.labels else '--max-batch ' + label}: "
                          f"{statistics.median(values):.2f}x "
                          f"({values[0]:.2f}-{values[-1]:.2f}x)")
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
        voices.cleanup()


if __name__ == "__main__":
    main()
