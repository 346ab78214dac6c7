"""Load: 32 concurrent clients against ``--max-concurrency 2 --max-queue 8`` (each request
succeeds or is refused at once with 429 and Retry-After; ``/health`` keeps answering), flat
memory over 200 requests, and a client that goes away cancels its synthesis."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from .conftest import ServerProcess

CLIENTS = 32
LONG_TEXT = ("One sentence for a long take. Then another one follows it. A third keeps going on. "
             "The fourth is here as well. And a fifth one ends it.")
#: Many small chunks and many steps: a synthesis that runs long enough to be cut short.
LONG = {"input": LONG_TEXT, "audio_chunk_threshold": 0.2, "audio_chunk_duration": 0.2,
        "num_inference_steps": 64}


@pytest.fixture()
def busy_server(server: ServerProcess) -> ServerProcess:
    """The session's server (``--max-concurrency 2 --max-queue 8``), idle."""
    _wait_idle(server)
    return server


def _wait_idle(server: ServerProcess, timeout: float = 30) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        model = httpx.get(server.url + "/health", timeout=10).json()["models"]["omnivoice-demo"]
        if model["synthesizing"] == 0 and model["queued"] == 0:
            return time.monotonic() - t0
        time.sleep(0.05)
    raise AssertionError(f"the server is still busy after {timeout} s")


def test_32_clients_succeed_or_are_refused_at_once(busy_server: ServerProcess) -> None:
    body = {"input": "Hello there, a short one.", "num_inference_steps": 8, "response_format": "pcm"}
    start = threading.Barrier(CLIENTS + 1)

    def one(i: int) -> tuple[int, float, dict[str, str]]:
        with httpx.Client(timeout=300) as http:
            start.wait()
            t0 = time.monotonic()
            r = http.post(busy_server.url + "/v1/audio/speech", json={**body, "seed": i})
            return r.status_code, time.monotonic() - t0, {**r.headers, "_code": r.json()["error"]["code"]
                                                          if r.status_code >= 400 else ""}

    rejected_before = busy_server.metric("audiocpp_rejected_total")
    health: list[float] = []
    with ThreadPoolExecutor(CLIENTS) as pool:
        futures = [pool.submit(one, i) for i in range(CLIENTS)]
        start.wait()
        while not all(f.done() for f in futures):
            t0 = time.monotonic()
            assert httpx.get(busy_server.url + "/health", timeout=10).status_code == 200
            health.append(time.monotonic() - t0)
            time.sleep(0.1)
        results = [f.result(timeout=300) for f in futures]
    statuses = [status for status, _, _ in results]
    assert set(statuses) <= {200, 429, 503}, statuses
    ok, refused = statuses.count(200), [r for r in results if r[0] != 200]
    assert ok >= 2 and refused, statuses
    assert ok <= CLIENTS
    for _, elapsed, headers in refused:
        assert elapsed < 5, f"a refusal took {elapsed:.2f} s"
        assert int(headers["retry-after"]) >= 1 and headers["_code"] == "server_busy"
    assert health and max(health) < 5, health
    assert busy_server.metric("audiocpp_rejected_total") == rejected_before + len(refused)
    _wait_idle(busy_server)


def test_memory_stays_flat(busy_server: ServerProcess) -> None:
    forms = [{"response_format": "wav"}, {"response_format": "flac"},
             {"response_format": "pcm", "stream_format": "audio"},
             {"response_format": "pcm", "stream_format": "sse"}]

    def run(count: int) -> None:
        with httpx.Client(timeout=120) as http:
            for i in range(count):
                body = {"input": f"Short text number {i % 7}.", "num_inference_steps": 1,
                        **forms[i % len(forms)]}
                r = http.post(busy_server.url + "/v1/audio/speech", json=body)
                assert r.status_code == 200, r.text

    def parallel(count: int) -> None:  # two clients: the queue is exercised too
        with ThreadPoolExecutor(2) as pool:
            for f in [pool.submit(run, count // 2) for _ in range(2)]:
                f.result()

    parallel(20)
    after_20 = busy_server.rss_bytes()
    parallel(180)
    after_200 = busy_server.rss_bytes()
    print(f"server RSS after 20 requests: {after_20 / 2**20:.1f} MiB, after 200: {after_200 / 2**20:.1f} MiB")
    assert after_200 <= 1.10 * after_20, f"RSS grew from {after_20 >> 20} MiB to {after_200 >> 20} MiB"


def test_disconnect_mid_stream_cancels_the_synthesis(busy_server: ServerProcess) -> None:
    before = busy_server.metric("audiocpp_cancelled_total")
    with httpx.stream("POST", busy_server.url + "/v1/audio/speech", timeout=120,
                      json={**LONG, "response_format": "pcm", "stream_format": "audio"}) as r:
        assert r.status_code == 200
        next(r.iter_raw())  # the first piece, then hang up
    assert _wait_idle(busy_server) < 10
    assert busy_server.metric("audiocpp_cancelled_total") == before + 1
    assert busy_server.metric('audiocpp_requests_total{endpoint="/v1/audio/speech",'
                              'model="omnivoice-demo",status="200"}') >= 1


def test_disconnect_while_waiting_cancels_an_offline_synthesis(busy_server: ServerProcess,
                                                               tmp_path: Path) -> None:
    before = busy_server.metric("audiocpp_cancelled_total")
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(busy_server.url + "/v1/audio/speech", json={**LONG, "num_inference_steps": 256},
                   timeout=1.0)
    assert _wait_idle(busy_server) < 10
    assert busy_server.metric("audiocpp_cancelled_total") == before + 1
    r = httpx.post(busy_server.url + "/v1/audio/speech",
                   json={"input": "Still here.", "num_inference_steps": 2}, timeout=120)
    assert r.status_code == 200
