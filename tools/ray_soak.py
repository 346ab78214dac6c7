"""Soak of ``audiocpp serve --ray`` with a replica killed mid-way: the full-size figure of
tests/server/test_ray_serve.py::test_a_replica_killed_loses_no_request_that_had_not_streamed.

``python -m tools.ray_soak [--requests 300] [--clients 8] [--kill-at 0.5] [--steps 4]`` starts a
two-node Ray cluster on this machine (``ray.cluster_utils.Cluster``, one CPU per node), ``audiocpp
serve --ray-address`` on it with the OmniVoice demo model in 2 replicas of half a CPU, then
``--clients`` threads that send ``--requests`` requests in turn (whole WAV, SSE stream, raw PCM
stream; seeds differ). When ``--kill-at`` of them are answered, the replica that served the last
answer is killed (``ray.kill``, not restarted: Ray Serve starts another). Printed as JSON: the
answers by outcome, the requests lost (admitted and not yet streaming, yet not answered: must be 0),
the streams cut after their first piece (allowed: a clean error event or a closed connection),
internal errors (500: must be 0), the requests the ingress sent again (their replica died before
their first piece) and the seconds until both replicas ran again. Exit status 1 when
a request was lost or an internal error happened.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

TEXTS = ["The quick brown fox jumps over the lazy dog.", "A light rain fell on the quiet harbour town.",
         "She opened the window and looked at the hills.", "Every morning the baker sings an old song."]
KINDS = ("whole", "sse", "pcm")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def one(url: str, i: int, steps: int) -> dict[str, Any]:
    """Request ``i``: its kind, status, replica, whether its stream had started, and how it ended."""
    kind = KINDS[i % len(KINDS)]
    body: dict[str, Any] = {"model": "omnivoice-demo", "input": TEXTS[i % len(TEXTS)], "seed": i,
                            "num_inference_steps": steps}
    if kind == "sse":
        body["stream_format"] = "sse"
    elif kind == "pcm":
        body.update(response_format="pcm", stream_format="audio")
    out: dict[str, Any] = {"i": i, "kind": kind, "streamed": False, "ok": False}
    try:
        with httpx.stream("POST", url + "/v1/audio/speech", json=body, timeout=300) as r:
            out["status"], out["replica"] = r.status_code, r.headers.get("x-audiocpp-replica")
            out["streamed"] = kind != "whole" and r.status_code == 200  # headers come with the first piece
            data = r.read()
        if r.status_code != 200:
            out["code"] = json.loads(data)["error"]["code"]
        elif kind == "sse":
            last = json.loads(data.decode().strip().splitlines()[-1][6:])
            out["ok"] = last["type"] == "speech.audio.done"
            out["code"] = None if out["ok"] else last.get("error", {}).get("code")
        else:
            out["ok"] = bool(data)
    except httpx.HTTPError as error:  # a stream whose connection closed before its end
        out["code"] = type(error).__name__
    return out


def _replica_actor(replica: str) -> Any:
    import ray

    for actor in ray.util.list_named_actors(all_namespaces=True):
        if actor["namespace"] == "serve" and actor["name"].endswith("#" + replica):
            return ray.get_actor(actor["name"], namespace="serve")
    return None


def _series(url: str, key: str) -> float:
    """One series of the ingress's /metrics (``key``: its name and labels), 0 when absent."""
    text = httpx.get(url + "/metrics", timeout=30).text
    return next((float(line[len(key) + 1:]) for line in text.splitlines() if line.startswith(key + " ")), 0.0)


def _running(url: str) -> float:
    return _series(url, 'audiocpp_ray_replicas{model="omnivoice-demo",state="RUNNING"}')


def soak(url: str, requests: int, clients: int, kill_at: float, steps: int) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    lock = threading.Lock()
    counter = iter(range(requests))
    killed: dict[str, Any] = {}

    def client() -> None:
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            out = one(url, i, steps)
            with lock:
                results.append(out)
                due = not killed and len(results) >= kill_at * requests and out.get("replica")
                if due:
                    killed["replica"], killed["at"] = out["replica"], time.monotonic()
            if due:
                import ray

                ray.kill(_replica_actor(out["replica"]), no_restart=True)

    started = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - started
    recovered = None
    while killed and time.monotonic() - killed["at"] < 300:
        if _running(url) == 2:
            recovered = round(time.monotonic() - killed["at"], 1)
            break
        time.sleep(1)
    lost = [r for r in results if not r["ok"] and not r["streamed"] and r.get("status") != 429]
    cut = [r for r in results if not r["ok"] and r["streamed"]]
    return {"requests": requests, "clients": clients, "wall_s": round(wall, 1),
            "killed_replica": killed.get("replica"), "answered": sum(r["ok"] for r in results),
            "by_kind": dict(Counter(r["kind"] for r in results if r["ok"])),
            "refused_429": sum(r.get("status") == 429 for r in results),
            "lost_before_streaming": len(lost), "lost": lost[:10],
            "cut_after_first_piece": len(cut), "cut_codes": dict(Counter(str(r.get("code")) for r in cut)),
            "internal_errors": sum(r.get("status") == 500 or r.get("code") == "internal_error"
                                   for r in results),
            "resubmitted": _series(url, 'audiocpp_ray_resubmitted_total{model="omnivoice-demo"}'),
            "replicas_back_after_s": recovered}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--clients", type=int, default=8, help="at most --max-queue + 1: none is refused")
    ap.add_argument("--kill-at", type=float, default=0.5, help="fraction answered when a replica is killed")
    ap.add_argument("--steps", type=int, default=4, help="MaskGIT steps per request (the demo model)")
    ap.add_argument("--max-queue", type=int, default=16)
    args = ap.parse_args(argv)

    import ray
    from ray.cluster_utils import Cluster

    nodes = Cluster(initialize_head=True, connect=True,
                    head_node_args={"num_cpus": 1, "include_dashboard": False})
    nodes.add_node(num_cpus=1)
    nodes.wait_for_nodes()
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = Path(tempfile.mkdtemp(prefix="audiocpp-ray-soak-")) / "serve.log"
    serve_cmd = [str(Path(sys.executable).parent / "audiocpp"), "serve", "--family", "omnivoice",
                 "--ray-address", nodes.address, "--replicas", "2", "--num-cpus", "0.5", "--port", str(port),
                 "--max-queue", str(args.max_queue), "--max-queue-per-key", str(args.max_queue)]
    with open(log, "wb") as fh:
        proc = subprocess.Popen(serve_cmd, stdout=fh, stderr=subprocess.STDOUT, env=dict(os.environ))
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200 and _running(url) == 2:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        else:
            raise SystemExit(f"the server did not start: see {log}")
        report = soak(url, args.requests, args.clients, args.kill_at, args.steps)
        report["serve_log_tracebacks"] = log.read_text(errors="replace").count("Traceback")
        print(json.dumps(report, indent=2))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
        ray.shutdown()
        nodes.shutdown()
    sys.exit(1 if report["lost_before_streaming"] or report["internal_errors"] else 0)


if __name__ == "__main__":
    main()
