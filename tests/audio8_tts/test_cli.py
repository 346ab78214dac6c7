"""The real ``audiocpp`` CLI as a subprocess on the tiny Audio8 TTS checkpoint: tts and cloning
(family auto-detected from the folder and from packages), streaming with --out-dir, packaging then
running the package, ``audiocpp families``, and bad inputs (one clear message, exit 2 for usage
and 1 for broken models, no traceback, no output file)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from audiocpp.engine.records import TaskRequest, VoiceReference
from tests.support import REPO, cli_ok, run_cli, same_audio
from tests.support import read_wav as read

SHORT = ["--request-option", "max_new_tokens=12"]
TEXT = "Hello world. This is a test."
REF_TEXT = "This is a tiny test."


def test_tts_matches_the_python_api(tiny_dir: Path, tiny, tmp_path: Path) -> None:
    out = tmp_path / "tts.wav"
    stdout = cli_ok("--model", tiny_dir, "--text", TEXT, "--seed", "7", *SHORT, "--format", "wav32",
                    "--out", out, "--metrics")
    assert "sample_rate=44100" in stdout and "seed=7" in stdout and "rtf=" in stdout
    audio, rate = read(out)
    assert rate == 44100
    api = tiny.session("tts").run(TaskRequest(text=TEXT, seed=7, options={"max_new_tokens": 12}))
    assert same_audio(audio, api.audio.samples)


def test_clone_from_the_package_streaming(tiny_dir: Path, audio_dir: Path, tiny, tmp_path: Path) -> None:
    package = tmp_path / "tiny-f32.gguf"
    cli_ok("package", "--spec", REPO / "model_specs" / "audio8_tts.json", "--input", tiny_dir,
           "--out", package)
    out, chunks = tmp_path / "clone.wav", tmp_path / "chunks"
    proc = run_cli("--task", "clon", "--model", package, "--text", TEXT,
                   "--voice-ref", audio_dir / "ref_24k.wav", "--reference-text", REF_TEXT, "--seed", "4",
                   *SHORT, "--request-option", "streaming_chunk_frames=3",
                   "--request-option", "streaming_first_chunk_frames=2", "--mode", "streaming",
                   "--out-dir", chunks, "--format", "wav32", "--out", out)
    assert proc.returncode == 0, proc.stderr
    events = [line for line in proc.stderr.splitlines() if line.startswith("event=audio")]
    files = sorted(chunks.glob("chunk_*.wav"), key=lambda p: int(p.stem.split("_")[1]))
    assert len(events) == len(files) >= 3
    assert len(read(files[0])[0]) == 2 * 2048  # the first event waits for two frames only
    assert all(len(read(f)[0]) == 3 * 2048 for f in files[1:-1])
    joined = np.concatenate([read(f)[0] for f in files])
    final = read(out)[0]
    assert joined.shape == final.shape
    api = tiny.session("clon").run(TaskRequest(text=TEXT, seed=4,
                                               voice=VoiceReference(path=audio_dir / "ref_24k.wav"),
                                               reference_text=REF_TEXT, options={"max_new_tokens": 12}))
    assert final.shape == api.audio.samples.shape
    assert np.abs(final - api.audio.samples).max() <= 1e-3  # wav16 chunks; streaming vs offline decode


def test_families_lists_audio8_supported() -> None:
    out = cli_ok("families")
    line = next(line for line in out.splitlines() if "audio8_tts" in line)
    assert "supported" in line and "wip" not in line


def _no_traceback(proc) -> None:
    assert "Traceback" not in proc.stderr


def test_clone_without_transcript_is_a_usage_error(tiny_dir: Path, audio_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "x.wav"
    proc = run_cli("--task", "clon", "--model", tiny_dir, "--text", TEXT,
                   "--voice-ref", audio_dir / "ref_24k.wav", "--out", out)
    assert proc.returncode == 2, proc.stderr
    assert "transcript" in proc.stderr and "--reference-text" in proc.stderr
    _no_traceback(proc)
    assert not out.exists()


def test_unknown_option_is_a_usage_error(tiny_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "x.wav"
    proc = run_cli("--model", tiny_dir, "--text", TEXT, "--request-option", "cfg_value=2", "--out", out)
    assert proc.returncode == 2 and "cfg_value" in proc.stderr
    _no_traceback(proc)
    assert not out.exists()


def test_codec_with_wrong_shapes_is_a_model_error(tiny_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "broken"
    shutil.copytree(tiny_dir, folder)
    state = torch.load(folder / "codec.pth", weights_only=True)
    key = "decoder.model.0.conv.parametrizations.weight.original1"
    state[key] = torch.zeros(state[key].shape[0], state[key].shape[1] + 1, state[key].shape[2])
    torch.save(state, folder / "codec.pth")
    out = tmp_path / "x.wav"
    proc = run_cli("--model", folder, "--text", TEXT, "--out", out)
    assert proc.returncode == 1
    assert "decoder.model.0.conv.weight" in proc.stderr and "wrong shape" in proc.stderr
    _no_traceback(proc)
    assert not out.exists()


@pytest.mark.parametrize("value", ["not json", json.dumps([{"audio": "/nonexistent.wav", "text": "a"}])])
def test_bad_multi_reference_cond(value: str, tiny_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "x.wav"
    proc = run_cli("--task", "clon", "--model", tiny_dir, "--text", TEXT, "--request-option",
                   f"multi_reference_cond={value}", "--out", out)
    assert proc.returncode == 2 and "multi_reference_cond" in proc.stderr
    _no_traceback(proc)
    assert not out.exists()
