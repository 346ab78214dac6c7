"""The server runs its requests on the model's executor, in its event loop: no thread per request.

The app is driven in this process through plain ASGI calls (one event loop, no HTTP client threads),
over the OmniVoice demo model: 64 streaming requests at once keep the thread count bounded by a small
constant and give each the audio it gives alone, and a client that disconnects mid-stream frees its
place in the model's queue at once.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import FAST

TEXT = "One small test. Then a second sentence here."
LONG = " ".join(f"Sentence number {i} goes on for a while." for i in range(12))


def _state(cache: dict[str, str], voices: Path, **limits: Any) -> Any:
    from audiocpp.server.cli import ServeArgs, build_state

    with pytest.MonkeyPatch.context() as env:
        env.setenv("AUDIOCPP_CACHE_DIR", cache["AUDIOCPP_CACHE_DIR"])
        return build_state(ServeArgs(family="omnivoice", voices_dir=voices, quiet=True, max_batch_force=True,
                                     **limits))


@pytest.fixture(scope="module")
def wide(server_cache: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Room for 64 requests at once (8 rows, 64 admitted): the old server made 64 threads for them."""
    state = _state(server_cache, tmp_path_factory.mktemp("voices"), max_batch=8, max_concurrency=64,
                   max_queue=0)
    yield state
    state.shutdown()


async def _post(app: Any, body: dict[str, Any], *, leave_after: int | None = None) -> tuple[int, bytes]:
    """``POST /v1/audio/speech`` straight into the ASGI app: (status, body). ``leave_after``: the client
    disconnects once that many body chunks have come."""
    data = json.dumps(body).encode()
    requests = [{"type": "http.request", "body": data, "more_body": False}]
    gone = asyncio.Event()
    status, chunks = [0], []

    async def receive() -> dict[str, Any]:
        if requests:
            return requests.pop()
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status[0] = message["status"]
        elif message["type"] == "http.response.body" and message.get("body"):
            chunks.append(message["body"])
            if leave_after is not None and len(chunks) >= leave_after:
                gone.set()

    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": "/v1/audio/speech", "raw_path": b"/v1/audio/speech",
             "query_string": b"", "root_path": "", "client": ("127.0.0.1", 50000),
             "server": ("testserver", 80), "headers": headers}
    await app(scope, receive, send)
    return status[0], b"".join(chunks)


def _body(seed: int, text: str = TEXT) -> dict[str, Any]:
    return {"input": text, "response_format": "pcm", "stream_format": "audio", "seed": seed, **FAST}


def test_64_streams_at_once_run_without_a_thread_each(wide: Any) -> None:
    from audiocpp.server.app import create_app

    app = create_app(wide)

    async def main() -> tuple[list[tuple[int, bytes]], list[tuple[int, bytes]], int, int]:
        alone = [await _post(app, _body(seed)) for seed in range(8)]
        before = threading.active_count()
        most = before
        tasks = [asyncio.ensure_future(_post(app, _body(i % 8))) for i in range(64)]
        while not all(t.done() for t in tasks):
            most = max(most, threading.active_count())
            await asyncio.sleep(0.005)
        return alone, [t.result() for t in tasks], before, most

    alone, together, before, most = asyncio.run(main())
    assert all(status == 200 and audio for status, audio in alone)
    assert len({audio for _, audio in alone}) == 8  # eight different requests
    assert [status for status, _ in together] == [200] * 64
    assert [audio for _, audio in together] == [alone[i % 8][1] for i in range(64)]
    assert most <= before + 4, (before, most)  # the executor's thread and a few helpers, not 64
    worker = wide.workers[next(iter(wide.workers))]
    assert worker.synthesizing == 0 and worker.queued == 0


def test_a_client_that_disconnects_frees_its_place(server_cache: dict[str, str],
                                                   tmp_path_factory: pytest.TempPathFactory) -> None:
    """One place (a row, no queue): a long stream left after its first piece ends, and its place takes
    the next request at once instead of a 429."""
    from audiocpp.server.app import create_app

    state = _state(server_cache, tmp_path_factory.mktemp("voices"), max_batch=1, max_concurrency=1,
                   max_queue=0)
    worker = state.workers[next(iter(state.workers))]
    app = create_app(state)

    async def main() -> tuple[int, int, int, int]:
        status, partial = await _post(app, _body(0, LONG), leave_after=1)
        for _ in range(200):  # the row leaves at the batch's next step
            if worker.synthesizing == 0 and worker.queued == 0:
                break
            await asyncio.sleep(0.01)
        left = worker.synthesizing + worker.queued
        after, _ = await _post(app, _body(1))
        return status, len(partial), left, after

    try:
        status, partial, left, after = asyncio.run(main())
    finally:
        state.shutdown()
    assert status == 200 and partial > 0
    assert left == 0
    assert after == 200
    assert state.metrics.cancelled[next(iter(state.workers))] == 1
