"""Two families behind one server, picked by the ``model`` field: the demo OmniVoice and a tiny
random VoxCPM2 checkpoint (built like tests/voxcpm2 does). VoxCPM2 streams for real (one piece
per generated patch group), and its audio equals the CLI's for the same request and seed."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import soundfile as sf

from tests.support import cli_ok

from .conftest import ServerProcess, new_key

SEED = 3
VOX = {"max_tokens": 8, "min_tokens": 7, "retry_badcase": False}


@pytest.fixture(scope="module")
def vox_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:  # the tiny-checkpoint builder tests/voxcpm2 uses (tools/voxcpm2/, earlier tools/voxcpm/)
        from tools.voxcpm2 import checkpoint
    except ImportError:
        from tools.voxcpm import checkpoint

    return checkpoint.write_checkpoint(tmp_path_factory.mktemp("vox") / "tiny", checkpoint.TINY_V2, seed=1234)


@pytest.fixture(scope="module")
def two_models(tmp_path_factory: pytest.TempPathFactory, server_cache: dict[str, str],
               vox_checkpoint: Path) -> Iterator[ServerProcess]:
    from audiocpp.engine.registry import get_family

    demo = get_family("omnivoice").demo_model_path()
    root = tmp_path_factory.mktemp("two")
    proc = ServerProcess(["--model", f"demo={demo}", "--model", f"vox={vox_checkpoint}",
                          "--voices-dir", str(root / "voices"), "--session-option", "voxcpm2.threads=0",
                          "--max-concurrency", "4"],
                         root / "serve.log", env=server_cache, api_key=new_key(), inject=True)
    yield proc
    proc.stop()


def test_models_are_listed_with_their_families(two_models: ServerProcess) -> None:
    data = {m["id"]: m for m in httpx.get(two_models.url + "/v1/models").json()["data"]}
    assert data["demo"]["family"] == "omnivoice" and data["demo"]["sample_rate"] == 24000
    assert data["vox"]["family"] == "voxcpm2" and data["vox"]["sample_rate"] == 48000
    vox_options = {row["name"] for row in data["vox"]["request_options"]}
    assert "max_tokens" in vox_options and "prompt_audio" not in vox_options  # a server file: not offered


def test_voxcpm2_offline_and_streamed_equal_the_cli(two_models: ServerProcess, vox_checkpoint: Path,
                                                    tmp_path: Path) -> None:
    text = "Hello world."
    args = [a for k, v in VOX.items() for a in ("-r", f"{k}={str(v).lower()}")]
    cli_ok("--model", vox_checkpoint, "--text", text, "--seed", str(SEED), *args,
           "--out", tmp_path / "cli.wav")
    r = httpx.post(two_models.url + "/v1/audio/speech", timeout=300,
                   json={"model": "vox", "input": text, "seed": SEED, **VOX})
    assert r.status_code == 200, r.text
    assert r.content == (tmp_path / "cli.wav").read_bytes()
    assert r.headers["x-audiocpp-sample-rate"] == "48000"

    cli_ok("--model", vox_checkpoint, "--text", text, "--seed", str(SEED), *args, "--mode", "streaming",
           "--out-dir", tmp_path / "chunks", "--out", tmp_path / "all.wav")
    chunks = sorted((tmp_path / "chunks").glob("chunk_*.wav"), key=lambda p: int(p.stem.split("_")[1]))
    assert len(chunks) >= 2
    with httpx.stream("POST", two_models.url + "/v1/audio/speech", timeout=300,
                      json={"model": "vox", "input": text, "seed": SEED, "stream_format": "sse",
                            "sample_rate": "native", **VOX}) as s:
        events = [json.loads(line[6:]) for line in s.iter_lines() if line.startswith("data: ")]
    deltas = [base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta"]
    assert len(deltas) == len(chunks)
    for delta, chunk in zip(deltas, chunks):
        assert delta == sf.read(chunk, dtype="int16")[0].astype("<i2").tobytes()


def test_family_specific_refusals(two_models: ServerProcess) -> None:
    cases = [
        ({"model": "vox", "input": "Hi.", "prompt_audio": "/etc/hostname", "prompt_text": "x"},
         "prompt_audio", "not accepted over HTTP"),
        ({"model": "vox", "input": "Hi.", "speed": 1.5}, "speed", "does not support speed"),
        ({"model": "demo", "input": "Hi.", "max_tokens": 8}, "max_tokens", "no request option"),
    ]
    for body, param, words in cases:
        r = httpx.post(two_models.url + "/v1/audio/speech", json=body, timeout=60)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["param"] == param and words in r.json()["error"]["message"]


def test_concurrent_requests_to_one_model_are_not_mixed_up(two_models: ServerProcess) -> None:
    """VoxCPM2 sessions of one model share KV caches (four threads on one LoadedModel give wrong
    audio and "KV cache is full" errors); the server's per-model lock keeps each request whole."""
    from concurrent.futures import ThreadPoolExecutor

    def speak(seed: int) -> bytes:
        r = httpx.post(two_models.url + "/v1/audio/speech", timeout=300,
                       json={"model": "vox", "input": f"Number {seed}.", "seed": seed,
                             "response_format": "pcm", **VOX})
        assert r.status_code == 200, r.text
        return r.content

    alone = [speak(seed) for seed in range(4)]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(speak, range(4)))
    assert together == alone


def test_a_voice_without_a_transcript_is_for_the_models_that_clone_without_one(
        two_models: ServerProcess) -> None:
    """VoxCPM2 clones from the audio alone, OmniVoice needs its transcript: an upload without one is
    stored, listed for vox only, works with vox and is a 400 with demo naming what makes it work."""
    import io

    import numpy as np

    buffer = io.BytesIO()
    t = np.arange(9600) / 16000  # 0.6 s: the tiny checkpoint has room for a short reference only
    sf.write(buffer, (0.3 * np.sin(2 * np.pi * 180 * t)).astype(np.float32), 16000, format="WAV")
    r = httpx.post(two_models.url + "/v1/audio/voices", data={"name": "plain"},
                   files={"file": ("plain.wav", buffer.getvalue(), "audio/wav")}, timeout=60)
    assert r.status_code == 201, r.text
    listed = {v["name"]: v for v in httpx.get(two_models.url + "/v1/audio/voices").json()["voices"]}
    assert listed["plain"]["models"] == ["vox"] and listed["default"]["models"] == ["demo", "vox"]
    r = httpx.post(two_models.url + "/v1/audio/speech", timeout=300,
                   json={"model": "vox", "input": "Hi.", "voice": "plain", "seed": SEED, **VOX})
    assert r.status_code == 200, r.text
    r = httpx.post(two_models.url + "/v1/audio/speech",
                   json={"model": "demo", "input": "Hi.", "voice": "plain"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "voice_unusable", r.text
    assert "reference_text" in r.json()["error"]["message"]
