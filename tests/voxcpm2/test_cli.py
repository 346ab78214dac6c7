"""The real ``audiocpp`` CLI as a subprocess on the tiny VoxCPM2 checkpoint: every task and
cloning mode, streaming with --out-dir, packaging then running the package, and bad inputs
(non-zero exit, a clear message, no output file)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from audiocpp.engine.records import TaskRequest, VoiceReference
from tests.support import cli_ok, run_cli, same_audio
from tests.support import read_wav as read

SHORT = ["--request-option", "max_tokens=6", "--request-option", "retry_badcase=false"]


def test_tts_matches_the_python_api(tiny_ckpt: Path, tmp_path: Path, loaded) -> None:
    out = tmp_path / "tts.wav"
    stdout = cli_ok("--task", "tts", "--model", tiny_ckpt, "--text", "Hello world.", "--seed", "42",
                    *SHORT, "--format", "wav32", "--out", out, "--metrics")
    assert f"audio_out={out}" in stdout and "sample_rate=48000" in stdout and "seed=42" in stdout
    audio, rate = read(out)
    assert rate == 48000
    api = loaded("tiny").session("tts").run(
        TaskRequest(text="Hello world.", seed=42, options={"max_tokens": 6, "retry_badcase": False}))
    assert same_audio(audio, api.audio.samples)


def test_design_by_instruct_equals_design_by_text_prefix(tiny_ckpt: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a.wav", tmp_path / "b.wav"
    cli_ok("--task", "design", "--model", tiny_ckpt, "--instruct", "a calm voice", "--text", "Hello.",
           "--seed", "1", *SHORT, "--format", "wav32", "--out", a)
    cli_ok("--task", "design", "--model", tiny_ckpt, "--text", "(a calm voice)Hello.",
           "--seed", "1", *SHORT, "--format", "wav32", "--out", b)
    assert np.array_equal(read(a)[0], read(b)[0])


@pytest.mark.parametrize("mode", ["reference", "ultimate", "prompt", "both"])
def test_clone_modes(mode: str, tiny_ckpt: Path, audio_files: dict[str, Path], tmp_path: Path,
                     loaded) -> None:
    out = tmp_path / f"{mode}.wav"
    args: list[str | Path] = []
    options: dict[str, object] = {"max_tokens": 6, "retry_badcase": False}
    voice = None
    if mode in ("reference", "ultimate", "both"):
        args += ["--voice-ref", audio_files["ref"]]
        voice = VoiceReference(path=audio_files["ref"])
    if mode == "ultimate":
        args += ["--reference-text", "This is a tiny test."]
        options["reference_text"] = "This is a tiny test."
    if mode in ("prompt", "both"):
        args += ["--request-option", f"prompt_audio={audio_files['prompt']}",
                 "--request-option", "prompt_text=This is a tiny test."]
        options.update(prompt_audio=str(audio_files["prompt"]), prompt_text="This is a tiny test.")
    cli_ok("--task", "clon", "--model", tiny_ckpt, "--text", "Hello.", "--seed", "5", *args, *SHORT,
           "--format", "wav32", "--out", out)
    api = loaded("tiny").session("clon").run(TaskRequest(text="Hello.", seed=5, voice=voice, options=options))
    expected = {"reference": "reference", "ultimate": "ref_continuation", "prompt": "continuation",
                "both": "ref_continuation"}[mode]
    assert api.details["mode"] == expected
    assert same_audio(read(out)[0], api.audio.samples)


def test_streaming_writes_each_patch(tiny_ckpt: Path, tmp_path: Path) -> None:
    out, chunks = tmp_path / "stream.wav", tmp_path / "chunks"
    proc = run_cli("--task", "tts", "--model", tiny_ckpt, "--text", "Hello world.", "--seed", "3",
                   "--request-option", "max_tokens=8", "--request-option", "min_tokens=7",
                   "--mode", "streaming", "--out-dir", chunks, "--out", out)
    assert proc.returncode == 0, proc.stderr
    events = [line for line in proc.stderr.splitlines() if line.startswith("event=audio")]
    files = sorted(chunks.glob("chunk_*.wav"), key=lambda p: int(p.stem.split("_")[1]))
    assert len(events) == len(files) == 8
    joined = np.concatenate([read(f)[0] for f in files])
    assert np.array_equal(joined, read(out)[0])


def test_package_then_run_the_package(tiny_ckpt: Path, tmp_path: Path) -> None:
    folder_out = tmp_path / "folder.wav"
    cli_ok("--task", "tts", "--model", tiny_ckpt, "--text", "Hello.", "--seed", "9", *SHORT,
           "--format", "wav32", "--out", folder_out)
    for kind in ("f32", "q8_0"):
        package = tmp_path / f"voxcpm2-{kind}.gguf"
        cli_ok("package", "--spec", Path(__file__).resolve().parents[2] / "model_specs" / "voxcpm2.json",
               "--input", tiny_ckpt, "--type", kind, "--out", package)
        out = tmp_path / f"{kind}.wav"
        cli_ok("--task", "tts", "--model", package, "--text", "Hello.", "--seed", "9", *SHORT,
               "--format", "wav32", "--out", out)
        if kind == "f32":
            assert np.array_equal(read(out)[0], read(folder_out)[0])
        else:
            assert read(out)[0].shape == read(folder_out)[0].shape


BAD = [
    ("prompt_audio without prompt_text", ["--task", "clon", "--request-option", "prompt_audio={prompt}"], 2,
     "prompt_text"),
    ("prompt_text without prompt_audio", ["--task", "clon", "--voice-ref", "{ref}", "--request-option",
                                          "prompt_text=hi"], 2, "prompt_audio"),
    ("unknown option", ["--task", "tts", "--request-option", "foo=1"], 2, "no request option 'foo'"),
    ("unreadable reference audio", ["--task", "clon", "--voice-ref", "{bad}"], 1, "cannot decode audio"),
    ("missing reference audio", ["--task", "clon", "--voice-ref", "{missing}"], 2, "does not exist"),
    ("clone without reference", ["--task", "clon"], 2, "needs a reference voice"),
    ("design without description", ["--task", "design"], 2, "needs a description"),
    ("reference text without reference", ["--task", "tts", "--reference-text", "hi"], 2, "--voice-ref"),
    ("reference audio in tts", ["--task", "tts", "--voice-ref", "{ref}"], 2, "--task clon"),
    ("bad option value", ["--task", "tts", "--request-option", "num_inference_steps=zero"], 2, "integer"),
    ("bad load option value", ["--task", "tts", "--load-option", "packed_linear=maybe"], 2, "boolean"),
]


@pytest.mark.parametrize("label,args,code,message", BAD, ids=[b[0] for b in BAD])
def test_bad_inputs_fail_cleanly(label: str, args: list[str], code: int, message: str, tiny_ckpt: Path,
                                 audio_files: dict[str, Path], tmp_path: Path) -> None:
    bad = tmp_path / "bad.wav"
    bad.write_text("this is not audio")
    paths = {"prompt": audio_files["prompt"], "ref": audio_files["ref"], "bad": bad,
             "missing": tmp_path / "missing.wav"}
    out = tmp_path / "out.wav"
    proc = run_cli("--model", tiny_ckpt, "--text", "Hello.", *[a.format(**paths) for a in args], "--out", out)
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()
