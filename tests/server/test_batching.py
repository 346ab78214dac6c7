"""Concurrent requests share a model's forward passes: one real ``audiocpp serve`` with a tiny model of
every family (OmniVoice's demo, VoxCPM2, VoxCPM1, Audio8 0.6B and 0.1B) and ``--max-batch 8
--max-batch-force`` (OmniVoice batches on the CPU only when forced).

- 8 concurrent requests per model (real ``openai`` client, threads), with different texts, seeds
  and voices (the family's own, a stored voice), give byte for byte the audio each gives alone, and
  the model's batch-size histogram shows they ran together;
- a client that goes away mid-stream stops only its own row: the others' audio is unchanged;
- streaming and offline requests in one batch each get their own audio.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import soundfile as sf

from tests.support import REPO, voice_like_signal

from .conftest import ServerProcess, new_key

OPTIONS = {
    "omni": {"num_inference_steps": 4},
    "vox2": {"max_tokens": 10, "min_tokens": 2, "retry_badcase": False},
    "vox1": {"max_tokens": 10, "min_tokens": 2, "retry_badcase": False},
    "a8": {"max_new_tokens": 12},
    "falcon": {"max_new_tokens": 12},
}
TEXTS = ["Hello there.", "A second, longer sentence to say.", "Short.", "Numbers one two three.",
         "The fifth request is here.", "Six.", "Seven is a lucky number.", "The last of eight."]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from tools.voxcpm1.checkpoint import TINY_05B, write_v1_checkpoint
    from tools.voxcpm2.checkpoint import TINY_V2, write_checkpoint

    root = tmp_path_factory.mktemp("served-models")
    audio8 = REPO / "tests" / "data" / "audio8_tts"
    return {"vox2": write_checkpoint(root / "vox2", TINY_V2, seed=1234),
            "vox1": write_v1_checkpoint(root / "vox1", TINY_05B, seed=99),
            "a8": audio8 / "tiny", "falcon": audio8 / "falcon" / "tiny"}


@pytest.fixture(scope="module")
def batched_server(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory,
                   server_cache: dict[str, str]) -> Iterator[ServerProcess]:
    from audiocpp.families.omnivoice import plugin

    demo = plugin.demo_model_path()
    args = ["--model", f"omni={demo}",
            *[a for name, path in models.items() for a in ("--model", f"{name}={path}")],
            "--max-batch", "8", "--max-batch-force", "--max-queue", "16",
            "--voices-dir", str(tmp_path_factory.mktemp("voices")), "--session-option", "omnivoice.threads=1"]
    log = tmp_path_factory.mktemp("batched-log") / "serve.log"
    proc = ServerProcess(args, log, env=server_cache, api_key=new_key(), inject=True)
    ref = tmp_path_factory.mktemp("voice") / "me.wav"
    # short: the tiny models hold 512 positions
    sf.write(ref, voice_like_signal(3, 2400, 16000), 16000, subtype="FLOAT")
    with open(ref, "rb") as fh:
        r = httpx.post(proc.url + "/v1/audio/voices", data={"name": "me", "transcript": "This is my voice."},
                       files={"file": ("me.wav", fh, "audio/wav")}, timeout=60)
    assert r.status_code == 201, r.text
    yield proc
    proc.stop()


def bodies(model: str) -> list[dict[str, Any]]:
    voices = ["default", "alloy", "me", "me"]
    return [{"model": model, "input": text, "seed": 100 + i, "voice": voices[i % len(voices)],
             "response_format": "wav", **OPTIONS[model]} for i, text in enumerate(TEXTS)]


def post(server: ServerProcess, body: dict[str, Any]) -> bytes:
    r = httpx.post(server.url + "/v1/audio/speech", json=body, timeout=300)
    assert r.status_code == 200, r.text
    return r.content


def concurrently(fn, items: list[Any]) -> list[Any]:
    results: list[Any] = [None] * len(items)
    barrier = threading.Barrier(len(items))

    def run(i: int) -> None:
        barrier.wait()
        results[i] = fn(items[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(items))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def batched_rows(server: ServerProcess, model: str) -> float:
    """Rows beyond the first in every batched call of ``model`` so far (0: it never batched)."""
    return (server.metric(f'audiocpp_batch_size_sum{{model="{model}"}}')
            - server.metric(f'audiocpp_batch_size_count{{model="{model}"}}'))


@pytest.mark.parametrize("model", list(OPTIONS))
def test_eight_concurrent_requests_give_their_lone_audio(batched_server: ServerProcess, model: str) -> None:
    from openai import OpenAI

    requests = bodies(model)
    post(batched_server, requests[2])  # the stored voice's prompt for this model is saved by its first use
    alone = [post(batched_server, body) for body in requests]
    before = batched_rows(batched_server, model)
    client = OpenAI(base_url=batched_server.url + "/v1", api_key=batched_server.client_key, max_retries=0,
                    timeout=300)

    def through_openai(body: dict[str, Any]) -> bytes:
        extra = {k: v for k, v in body.items() if k not in ("model", "input", "voice", "response_format")}
        return client.audio.speech.create(model=body["model"], input=body["input"], voice=body["voice"],
                                          response_format="wav", extra_body=extra).content

    together = concurrently(through_openai, requests)
    assert [len(x) for x in together] == [len(x) for x in alone]
    for i, (a, b) in enumerate(zip(alone, together)):
        assert a == b, f"request {i} of {model}: the batched audio differs from its lone audio"
    assert batched_rows(batched_server, model) > before, "the concurrent requests never shared a step"


def stream_pcm(server: ServerProcess, body: dict[str, Any], *, stop_after: int | None = None) -> bytes:
    data = b""
    with httpx.stream("POST", server.url + "/v1/audio/speech", timeout=300,
                      json={**body, "response_format": "pcm", "stream_format": "audio"}) as r:
        assert r.status_code == 200
        for i, piece in enumerate(r.iter_raw()):
            data += piece
            if stop_after is not None and i + 1 >= stop_after:
                break
    return data


@pytest.mark.parametrize("model", ["vox2", "a8"])
def test_a_client_going_away_leaves_the_others_unchanged(batched_server: ServerProcess, model: str) -> None:
    # the one that leaves is mid-way
    longer = {"max_tokens": 30} if model == "vox2" else {"max_new_tokens": 40}
    requests = [{**body, **longer} for body in bodies(model)[:4]]
    alone = [stream_pcm(batched_server, body) for body in requests[1:]]
    cancelled = batched_server.metric(f'audiocpp_cancelled_total{{model="{model}"}}')

    def run(i: int) -> bytes:
        return stream_pcm(batched_server, requests[i], stop_after=1 if i == 0 else None)

    together = concurrently(run, list(range(4)))
    assert together[1:] == alone
    for _ in range(100):  # the server notices the disconnect at its next piece
        if batched_server.metric(f'audiocpp_cancelled_total{{model="{model}"}}') > cancelled:
            break
        time.sleep(0.1)
    assert batched_server.metric(f'audiocpp_cancelled_total{{model="{model}"}}') == cancelled + 1


@pytest.mark.parametrize("model", ["omni", "vox1", "falcon"])
def test_streaming_and_offline_requests_in_one_batch(batched_server: ServerProcess, model: str) -> None:
    requests = bodies(model)[:4]
    streamed = {0, 2}

    def run(i: int) -> bytes:
        return stream_pcm(batched_server, requests[i]) if i in streamed else post(batched_server, requests[i])

    alone = [run(i) for i in range(4)]
    together = concurrently(run, list(range(4)))
    assert together == alone
