"""The real CLI checks outputs and inputs before it loads a model (issue 11, items 1-3, 9).

``--model`` names an empty folder: loading it would fail with a model error (exit 1), so an
exit 2 naming the output or input proves the check ran first. Every runnable family gets the
same rules.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tests.support import run_cli

FAMILIES = ["omnivoice", "voxcpm2", "voxcpm1", "audio8_tts"]


@pytest.fixture()
def empty_model(tmp_path: Path) -> Path:
    folder = tmp_path / "not-a-model"
    folder.mkdir()
    return folder


@pytest.fixture()
def ref_wav(tmp_path: Path) -> Path:
    path = tmp_path / "ref.wav"
    sf.write(path, (0.3 * np.sin(np.arange(16000) / 16000 * 2 * np.pi * 220)).astype(np.float32), 16000)
    return path


def _refused(proc, *needles: str) -> None:
    """Exit 2 with error and hint lines, before loading (no model error, no demo note), no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.startswith("error: "), proc.stderr
    assert "\n  hint: " in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    for needle in needles:
        assert needle in proc.stderr, (needle, proc.stderr)


# -- item 1: --out-dir naming a file ----------------------------------------------------------
def test_out_dir_naming_a_file(empty_model: Path, tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    out = tmp_path / "x.wav"
    proc = run_cli("--family", "omnivoice", "--model", empty_model, "--text", "Hi.", "--out-dir", afile,
                   "--out", out)
    _refused(proc, f"--out-dir '{afile}' is a file")
    assert afile.read_text() == "keep me" and not out.exists()
    below = afile / "chunks"
    proc = run_cli("--family", "omnivoice", "--model", empty_model, "--text", "Hi.", "--out-dir", below,
                   "--out", out)
    _refused(proc, "cannot be created", "is a file")


# -- item 2: outputs found unusable after synthesis ---------------------------------------------
@pytest.mark.parametrize("case", ["proc", "folder", "missing_folder", "prompt_folder"])
def test_unusable_outputs_are_refused_before_loading(case: str, empty_model: Path, ref_wav: Path,
                                                     tmp_path: Path) -> None:
    args: list[str | Path] = ["--text", "Hi."]
    if case == "proc":  # not writable, for root too
        args += ["--out", "/proc/audiocpp-test.wav"]
        needle = "cannot write --out '/proc/audiocpp-test.wav'"
    elif case == "folder":
        (tmp_path / "dir.wav").mkdir()
        args += ["--out", tmp_path / "dir.wav"]
        needle = "is a folder"
    elif case == "missing_folder":
        args += ["--out", tmp_path / "nope" / "x.wav"]
        needle = f"mkdir -p {tmp_path / 'nope'}"
    else:
        (tmp_path / "v.pt").mkdir()
        args += ["--task", "clon", "--voice-ref", ref_wav, "--reference-text", "Hello.",
                 "--voice-prompt-out", tmp_path / "v.pt", "--out", tmp_path / "x.wav"]
        needle = "--voice-prompt-out"
    proc = run_cli("--family", "omnivoice", "--model", empty_model, *args)
    _refused(proc, needle)
    assert not (tmp_path / "x.wav").exists()


def test_voice_prompt_out_needs_a_clone(empty_model: Path, tmp_path: Path) -> None:
    proc = run_cli("--family", "omnivoice", "--model", empty_model, "--text", "Hi.", "--voice-prompt-out",
                   tmp_path / "v.pt", "--out", tmp_path / "x.wav")
    _refused(proc, "--voice-prompt-out saves the voice of a clone")


def test_out_dir_is_created_only_when_a_chunk_is_written(empty_model: Path, tmp_path: Path) -> None:
    chunks = tmp_path / "a" / "b"
    proc = run_cli("--family", "omnivoice", "--model", empty_model, "--text", "Hi.", "--out-dir", chunks,
                   "--out", tmp_path / "x.wav")
    assert proc.returncode == 1 and "error: " in proc.stderr  # the empty folder does not load
    assert not (tmp_path / "a").exists()


# -- item 3: inputs that used to be ignored, the same rules in every family ------------------------
INPUTS = [
    ("reference_text_on_tts", ["--task", "tts", "--reference-text", "Hello."],
     "--reference-text needs --voice-ref"),
    ("voice_ref_on_tts", ["--task", "tts", "--voice-ref", "REF"], "task 'tts' takes no reference audio"),
    ("voice_prompt_on_tts", ["--task", "tts", "--voice-prompt", "PROMPT"],
     "task 'tts' takes no voice prompt"),
    ("voice_and_prompt", ["--task", "clon", "--voice-ref", "REF", "--voice-prompt", "PROMPT"], "not both"),
    ("format_vs_extension", ["--format", "flac"], "--format flac does not match the extension"),
    ("session_option_prefix", ["--session-option", "compute_dtype=float32"], "lacks its family prefix"),
    ("unknown_request_option", ["--request-option", "warp=9"], "no request option 'warp'"),
]


FAMILY_CASES = [("omnivoice", *case) for case in INPUTS] + [
    (family, *case) for family in FAMILIES[1:] for case in INPUTS
    if case[0] in ("reference_text_on_tts", "voice_prompt_on_tts", "session_option_prefix")
]


@pytest.mark.parametrize(("family", "label", "args", "needle"), FAMILY_CASES,
                         ids=[f"{c[0]}-{c[1]}" for c in FAMILY_CASES])
def test_ignored_inputs_are_errors_in_every_family(family: str, label: str, args: list[str], needle: str,
                                                    empty_model: Path, ref_wav: Path, tmp_path: Path) -> None:
    prompt = tmp_path / "p.pt"
    prompt.write_bytes(b"not read: the rule fires first")
    args = [str(ref_wav) if a == "REF" else str(prompt) if a == "PROMPT" else a for a in args]
    out = tmp_path / "x.wav"
    proc = run_cli("--family", family, "--model", empty_model, "--text", "Hi.", *args, "--out", out)
    _refused(proc, needle)
    if label == "session_option_prefix":
        assert f"--session-option {family}.compute_dtype=float32" in proc.stderr
    assert not out.exists()


def test_design_is_refused_before_loading_where_the_family_has_none(empty_model: Path,
                                                                   tmp_path: Path) -> None:
    proc = run_cli("--family", "voxcpm1", "--model", empty_model, "--task", "design", "--instruct", "calm",
                   "--text", "Hi.", "--out", tmp_path / "x.wav")
    _refused(proc, "voxcpm1 does not support task 'design'", "tts, clon")


def test_matching_format_and_prefixed_session_option_run(tmp_path: Path) -> None:
    out = tmp_path / "x.wav"
    proc = run_cli("--family", "omnivoice", "--text", "Hi.", "--format", "wav24", "--session-option",
                   "omnivoice.threads=1", "-r", "num_inference_steps=2", "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert sf.info(str(out)).subtype == "PCM_24"
    odd = tmp_path / "x.audio"  # an extension that implies nothing takes any --format
    proc = run_cli("--family", "omnivoice", "--text", "Hi.", "--format", "flac",
                   "-r", "num_inference_steps=2", "--out", odd)
    assert proc.returncode == 0, proc.stderr
    assert sf.info(str(odd)).format == "FLAC"


# -- item 9: no arguments ---------------------------------------------------------------------------
def test_no_arguments_print_a_short_usage() -> None:
    proc = run_cli()
    assert proc.returncode == 2
    assert proc.stderr.startswith("usage: audiocpp"), proc.stderr
    assert 'audiocpp --text "Hello." --out hello.wav' in proc.stderr  # the default model: real speech
    assert "error: no output file" not in proc.stderr and len(proc.stderr.splitlines()) < 12
