"""Streaming a short text with OmniVoice (non-autoregressive) gives its first sentence's audio
before the rest is generated (issue 11, item 11), through the real CLI."""

from __future__ import annotations

from pathlib import Path

import soundfile as sf

from tests.support import run_cli

TEXT = "The keeper climbed the stairs. He counted every step. The lamp was waiting at the top."
FAST = ["-r", "num_inference_steps=4", "--seed", "3"]


def _stream(tmp_path: Path, *extra: str):
    chunks = tmp_path / "chunks"
    proc = run_cli("--family", "omnivoice", "--mode", "streaming", "--text", TEXT, "--out-dir", chunks,
                   "--out", tmp_path / "all.wav", "--metrics", *FAST, *extra)
    assert proc.returncode == 0, proc.stderr
    events = [ln for ln in proc.stderr.splitlines() if ln.startswith("event=audio")]
    metrics = dict(ln.split("=", 1) for ln in proc.stdout.splitlines() if "=" in ln)
    return events, metrics, chunks


def test_a_short_text_streams_one_event_per_sentence(tmp_path: Path) -> None:
    events, metrics, chunks = _stream(tmp_path)
    assert len(events) == 3, events  # under the 30 s long-form threshold: one chunk per sentence
    assert int(metrics["num_chunks"]) == 3
    assert float(metrics["time_to_first_audio_s"]) < float(metrics["wall_s"])
    assert sorted(p.name for p in chunks.iterdir()) == ["chunk_0.wav", "chunk_1.wav", "chunk_2.wav"]
    assert all(sf.info(str(p)).frames > 0 for p in chunks.iterdir())


def test_chunking_off_streams_the_text_whole(tmp_path: Path) -> None:
    events, metrics, _ = _stream(tmp_path, "-r", "audio_chunk_duration=0")
    assert len(events) == 1 and int(metrics["num_chunks"]) == 1
