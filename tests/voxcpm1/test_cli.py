"""The real ``audiocpp`` CLI as a subprocess on the tiny VoxCPM1 checkpoints: tts for both
variants (family auto-detected), cloning with --voice-ref + --reference-text, streaming with
--out-dir, a VoxCPM.cpp GGUF auto-detected, packaging then running the package, and bad inputs
(non-zero exit, a clear message, no output file)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from audiocpp.engine.records import TaskRequest, VoiceReference
from tests.support import REPO, cli_ok, run_cli, same_audio
from tests.support import read_wav as read

from .cases import PROMPT_TEXT

SHORT = ["--request-option", "max_tokens=6", "--request-option", "retry_badcase=false"]
API_SHORT = {"max_tokens": 6, "retry_badcase": False}


@pytest.mark.parametrize("ck,rate", [("tiny_05b", 16000), ("tiny_15", 44100)])
def test_tts_matches_the_python_api(ck: str, rate: int, checkpoints, tmp_path: Path, loaded) -> None:
    out = tmp_path / "tts.wav"
    stdout = cli_ok("--task", "tts", "--model", checkpoints[ck], "--text", "Hello world.", "--seed", "42",
                    *SHORT, "--format", "wav32", "--out", out, "--metrics")
    assert f"audio_out={out}" in stdout and f"sample_rate={rate}" in stdout and "seed=42" in stdout
    audio, got_rate = read(out)
    assert got_rate == rate
    api = loaded(ck).session("tts").run(TaskRequest(text="Hello world.", seed=42, options=API_SHORT))
    assert same_audio(audio, api.audio.samples)


def test_clone_with_reference_text(checkpoints, audio_files: dict[str, Path], tmp_path: Path, loaded) -> None:
    out = tmp_path / "clone.wav"
    cli_ok("--family", "voxcpm1", "--task", "clon", "--model", checkpoints["tiny_15"], "--text", "Hello.",
           "--voice-ref", audio_files["prompt44k"], "--reference-text", PROMPT_TEXT, "--seed", "5", *SHORT,
           "--format", "wav32", "--out", out)
    api = loaded("tiny_15").session("clon").run(TaskRequest(
        text="Hello.", seed=5, voice=VoiceReference(path=audio_files["prompt44k"]),
        reference_text=PROMPT_TEXT, options=API_SHORT))
    assert api.details["mode"] == "continuation"
    assert same_audio(read(out)[0], api.audio.samples)


def test_streaming_writes_each_patch(checkpoints, audio_files: dict[str, Path], tmp_path: Path) -> None:
    out, chunks = tmp_path / "stream.wav", tmp_path / "chunks"
    proc = run_cli("--task", "clon", "--model", checkpoints["tiny_05b"], "--text", "Hello world.",
                   "--seed", "3", "--voice-ref", audio_files["prompt16k"], "--reference-text", PROMPT_TEXT,
                   "--request-option", "max_tokens=8", "--request-option", "min_tokens=7",
                   "--mode", "streaming", "--out-dir", chunks, "--out", out)
    assert proc.returncode == 0, proc.stderr
    events = [line for line in proc.stderr.splitlines() if line.startswith("event=audio")]
    files = sorted(chunks.glob("chunk_*.wav"), key=lambda p: int(p.stem.split("_")[1]))
    assert len(events) == len(files) == 8
    assert all(len(read(f)[0]) == 2 * 10 for f in files)  # one patch: 2 frames x hop 10
    assert np.array_equal(np.concatenate([read(f)[0] for f in files]), read(out)[0])


def test_voxcpm_cpp_gguf_is_detected_and_runs(checkpoints, cpp_gguf, tmp_path: Path) -> None:
    folder_out, gguf_out = tmp_path / "folder.wav", tmp_path / "gguf.wav"
    for model, out in ((checkpoints["tiny_15"], folder_out), (cpp_gguf("tiny_15"), gguf_out)):
        cli_ok("--task", "tts", "--model", model, "--text", "Hello.", "--seed", "9", *SHORT,
               "--format", "wav32", "--out", out)
    assert np.array_equal(read(gguf_out)[0], read(folder_out)[0])
    inspected = cli_ok("inspect", cpp_gguf("tiny_15"))
    assert "voxcpm1" in inspected


def test_package_then_run_the_package(checkpoints, tmp_path: Path) -> None:
    folder_out = tmp_path / "folder.wav"
    cli_ok("--task", "tts", "--model", checkpoints["tiny_05b"], "--text", "Hello.", "--seed", "9", *SHORT,
           "--format", "wav32", "--out", folder_out)
    for kind in ("f32", "q8_0"):
        package = tmp_path / f"voxcpm1-{kind}.gguf"
        cli_ok("package", "--spec", REPO / "model_specs" / "voxcpm1.json", "--input", checkpoints["tiny_05b"],
               "--type", kind, "--out", package)
        out = tmp_path / f"{kind}.wav"
        exact = ("--session-option", "voxcpm1.compute_dtype=float32")  # Q8_0 alone (auto: float32-stored)
        cli_ok("--task", "tts", "--model", package, "--text", "Hello.", "--seed", "9", *SHORT,
               "--format", "wav32", "--out", out, *exact)
        if kind == "f32":
            assert np.array_equal(read(out)[0], read(folder_out)[0])
        else:
            assert read(out)[0].shape == read(folder_out)[0].shape


BAD = [
    ("clone without reference text", ["--task", "clon", "--voice-ref", "{prompt}"], 2,
     "needs --reference-text"),
    ("clone without reference", ["--task", "clon"], 2, "needs a reference voice"),
    ("reference text without reference", ["--task", "tts", "--reference-text", "hi"], 2, "--voice-ref"),
    ("reference audio in tts", ["--task", "tts", "--voice-ref", "{prompt}", "--reference-text", "hi"], 2,
     "--task clon"),
    ("design task", ["--task", "design", "--instruct", "a calm voice"], 2, "does not support task 'design'"),
    ("instruct", ["--task", "tts", "--instruct", "a calm voice"], 2, "no request option 'instruct'"),
    ("unknown option", ["--task", "tts", "--request-option", "foo=1"], 2, "no request option 'foo'"),
    ("bad option value", ["--task", "tts", "--request-option", "num_inference_steps=zero"], 2, "integer"),
    ("unreadable reference audio", ["--task", "clon", "--voice-ref", "{bad}", "--reference-text", "hi"], 1,
     "cannot decode audio"),
    ("missing reference audio", ["--task", "clon", "--voice-ref", "{missing}", "--reference-text", "hi"], 2,
     "does not exist"),
]


@pytest.mark.parametrize("label,args,code,message", BAD, ids=[b[0] for b in BAD])
def test_bad_inputs_fail_cleanly(label: str, args: list[str], code: int, message: str, checkpoints,
                                 audio_files: dict[str, Path], tmp_path: Path) -> None:
    bad = tmp_path / "bad.wav"
    bad.write_text("this is not audio")
    paths = {"prompt": audio_files["prompt16k"], "bad": bad, "missing": tmp_path / "missing.wav"}
    out = tmp_path / "out.wav"
    proc = run_cli("--model", checkpoints["tiny_05b"], "--text", "Hello.", *[a.format(**paths) for a in args],
                   "--out", out)
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()


def test_voxcpm2_folder_is_refused_by_voxcpm1(checkpoints, tmp_path: Path) -> None:
    import json
    import shutil

    other = tmp_path / "v2"
    shutil.copytree(checkpoints["tiny_05b"], other)
    config = json.loads((other / "config.json").read_text())
    config["architecture"] = "voxcpm2"
    (other / "config.json").write_text(json.dumps(config))
    out = tmp_path / "out.wav"
    proc = run_cli("--family", "voxcpm1", "--model", other, "--text", "Hello.", "--out", out)
    assert proc.returncode == 1 and "--family voxcpm2" in proc.stderr and not out.exists()
