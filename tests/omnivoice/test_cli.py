"""The real ``audiocpp`` CLI (a subprocess) on tiny OmniVoice checkpoints: the main command
on the demo model, tts/design/clon, streaming events, --out-dir chunks, voice prompts out and
in, package then run the package, and user errors (exit 2, a clear message, no output)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tests.omnivoice.cases import MEDIUM_TEXT, reference_tone
from tests.support import REPO, run_cli

FAST = ("-r", "num_inference_steps=4")


@pytest.fixture(scope="module")
def ref_wav(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("omnivoice-cli-ref") / "me.wav"
    sf.write(path, reference_tone(), 24000)
    return path


def ok(proc) -> str:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc.stdout


def test_main_command_runs_the_demo_model_from_an_empty_cache(tmp_path):
    cache = tmp_path / "cache"
    out = tmp_path / "x.wav"
    proc = run_cli("--family", "omnivoice", "--task", "tts", "--text", "Hello from the demo.", "--out", out,
                   env={"AUDIOCPP_CACHE_DIR": str(cache)})
    ok(proc)
    assert "not speech" in proc.stderr
    audio, sr = sf.read(out)
    assert sr == 24000 and audio.shape[0] > 0
    demo = next((cache / "demo").glob("omnivoice-*"))
    assert (demo / "config.json").is_file() and (demo / "audio_tokenizer" / "model.safetensors").is_file()
    stamp = (demo / "model.safetensors").stat().st_mtime_ns
    ok(run_cli("--family", "omnivoice", "--text", "Again.", "--seed", "1", "--out", tmp_path / "y.wav", *FAST,
               env={"AUDIOCPP_CACHE_DIR": str(cache)}))
    assert (demo / "model.safetensors").stat().st_mtime_ns == stamp  # built once, then reused
    assert not [p for p in (cache / "demo").iterdir() if p.name.startswith(".")]  # no leftovers


def test_tts_design_and_detection(demo_snapshot, tmp_path):
    out = tmp_path / "a.wav"
    stdout = ok(run_cli("--model", demo_snapshot, "--text", "Hello.", "--seed", "3", "--out", out, *FAST,
                        "--metrics"))
    assert "rtf=" in stdout and "seed=3" in stdout
    design = tmp_path / "d.flac"
    ok(run_cli("--family", "omnivoice", "--task", "design", "--model", demo_snapshot, "--text", "Hello.",
               "--instruct", "female, low pitch, british accent", "--language", "English", "--out", design,
               *FAST))
    assert sf.info(design).samplerate == 24000


def test_clone_with_voice_prompt_out_and_in(demo_snapshot, ref_wav, tmp_path):
    a, b, prompt = tmp_path / "a.wav", tmp_path / "b.wav", tmp_path / "me.pt"
    stdout = ok(run_cli("--model", demo_snapshot, "--task", "clon", "--voice-ref", ref_wav,
                        "--reference-text", "Hello world", "--text", "This is a test.", "--seed", "5",
                        "--voice-prompt-out", prompt, "--out", a, *FAST))
    assert f"voice_prompt_out={prompt}" in stdout and prompt.is_file()
    ok(run_cli("--model", demo_snapshot, "--task", "clon", "--voice-prompt", prompt,
               "--text", "This is a test.", "--seed", "5", "--out", b, *FAST))
    assert np.array_equal(sf.read(a)[0], sf.read(b)[0])


def test_streaming_events_and_chunk_files(demo_snapshot, tmp_path):
    chunks = tmp_path / "chunks"
    proc = run_cli("--model", demo_snapshot, "--mode", "streaming", "--text", MEDIUM_TEXT, "--out",
                   tmp_path / "s.wav", "--out-dir", chunks, "-r", "audio_chunk_threshold=3",
                   "-r", "audio_chunk_duration=2", *FAST)
    ok(proc)
    events = [line for line in proc.stderr.splitlines() if line.startswith("event=audio")]
    assert len(events) > 1
    assert sorted(p.name for p in chunks.iterdir()) == sorted(f"chunk_{i}.wav" for i in range(len(events)))
    offline = tmp_path / "offline"
    ok(run_cli("--model", demo_snapshot, "--text", MEDIUM_TEXT, "--out", tmp_path / "o.wav",
               "--out-dir", offline, "-r", "audio_chunk_threshold=3", "-r", "audio_chunk_duration=2", *FAST))
    assert len(list(offline.glob("chunk_*.wav"))) == len(events)


def test_package_then_run_the_package(demo_snapshot, tmp_path):
    package = tmp_path / "omnivoice-q8_0.gguf"
    ok(run_cli("package", "--spec", REPO / "model_specs" / "omnivoice.json", "--input", demo_snapshot,
               "--type", "q8_0", "--out", package))
    inspect = ok(run_cli("inspect", package))
    assert "omnivoice" in inspect and "audio_tokenizer_weights" in inspect
    ok(run_cli("--model", package, "--text", "Hello.", "--out", tmp_path / "p.wav", *FAST))
    assert sf.info(tmp_path / "p.wav").frames > 0


def test_families_lists_omnivoice_as_supported():
    stdout = ok(run_cli("families"))
    line = next(line for line in stdout.splitlines() if line.startswith("omnivoice"))
    assert "supported" in line and "647" in line


@pytest.mark.parametrize(("args", "message"), [
    (("--task", "clon", "--voice-ref", "REF", "--text", "Hi."), "needs --reference-text"),
    (("--task", "design", "--instruct", "female, robot voice", "--text", "Hi."),
     "unsupported voice-design item"),
    (("--task", "design", "--text", "Hi."), "needs --instruct"),
    (("--text", "Hi.", "-r", "no_such_option=1"), "no_such_option"),
    (("--text", "Hi.", "-r", "num_inference_steps=0"), "below the minimum"),
    (("--text", "Hi.", "--language", "Klingonish"), "unknown language"),
])
def test_bad_inputs_exit_2_with_a_message_and_no_output(demo_snapshot, ref_wav, tmp_path, args, message):
    out = tmp_path / "never.wav"
    args = tuple(str(ref_wav) if a == "REF" else a for a in args)
    proc = run_cli("--model", demo_snapshot, *args, "--out", out)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()
