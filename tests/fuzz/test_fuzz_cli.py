"""Fuzz the command line with hostile files and values: ``audiocpp`` runs (a mutated weights
file as --model, mutated audio as --voice-ref, mutated prompts, option strings of any kind,
odd output names and formats), ``inspect``, ``options``, ``codec decode`` and ``batch --check``.

Each run goes through ``audiocpp.cli.main.main`` in this process (the real entry point of
the console script; a subprocess per input would cost a second of imports), with stdout and
stderr captured at the file-descriptor level. The promise: exit code 1 or 2, one ``error:``
message (its hint line allowed), no traceback, no "internal error", no output file, no
temporary file left, the inputs untouched. ``--model`` is always a local file, and the hub is
offline, so nothing is ever fetched.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from . import seeds
from . import test_fuzz_manifest_srt as manifest_targets
from .harness import Broken, check, fuzz_settings
from .mutate import mutated

FAMILIES = ["omnivoice", "voxcpm2", "voxcpm1", "audio8_tts"]
OPTION_NAMES = ["seed", "speed", "num_step", "guidance_scale", "denoise", "max_tokens", "instruct",
                "language", "codec", "device", "compute_dtype", "threads", "max_reference_seconds",
                "prompt_audio", "x", ""]
VALUES = st.one_of(st.text(max_size=12),
                   st.sampled_from(["1", "-1", "0", "1e999", "nan", "~nosuchuser/x", "a\0b", "9" * 5000,
                                    "true", "bf16", "a,b", "", "/"]))


@contextlib.contextmanager
def captured() -> Iterator[dict[str, str]]:
    """sys.stdout/sys.stderr and fd 1/2 captured (C libraries write to the descriptors directly)."""
    import io
    import sys

    out: dict[str, str] = {}
    saved = os.dup(1), os.dup(2)
    py_out, py_err = io.StringIO(), io.StringIO()
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        os.dup2(fo.fileno(), 1)
        os.dup2(fe.fileno(), 2)
        try:
            stdin = sys.stdin
            sys.stdin = io.TextIOWrapper(io.BytesIO(b""))  # no --text: the CLI reads an empty stdin
            try:
                with contextlib.redirect_stdout(py_out), contextlib.redirect_stderr(py_err):
                    yield out
            finally:
                sys.stdin = stdin
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            fo.seek(0)
            fe.seek(0)
            out["stdout"] = py_out.getvalue() + fo.read().decode("utf-8", "replace")
            out["stderr"] = py_err.getvalue() + fe.read().decode("utf-8", "replace")
            sys.stderr.flush()


def run_cli(argv: list[str]) -> tuple[int, str]:
    """``audiocpp ARGV`` in this process: (exit code, stderr)."""
    from audiocpp.cli.main import main

    with captured() as streams:
        try:
            main(argv)
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
    return code, streams["stderr"]


def promise(code: int, stderr: str, out_dir: Path, before: set[str]) -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    if "Traceback" in stderr or "internal error" in stderr:
        raise Broken(f"cli: a traceback or an internal error:\n{stderr[-2000:]}")
    if code not in (1, 2):
        raise Broken(f"cli: exit code {code} for a hostile input:\n{stderr[-1000:]}")
    errors = [line for line in lines if line.startswith(("error:", "Error:"))]
    if len(errors) != 1:
        raise Broken(f"cli: {len(errors)} error messages, wanted one:\n{stderr[-2000:]}")
    left = {p.name for p in out_dir.iterdir()} - before
    if left:
        raise Broken(f"cli: files left behind: {sorted(left)}")


@pytest.fixture(scope="module")
def cli_env() -> Iterator[None]:
    mp = pytest.MonkeyPatch()
    mp.setenv("HF_HUB_OFFLINE", "1")
    mp.setenv("AUDIOCPP_NO_DOWNLOAD", "1")
    mp.delenv("AUDIOCPP_DEBUG", raising=False)
    yield
    mp.undo()


@st.composite
def hostile_files(draw: st.DrawFn, folder: Path) -> dict[str, Path]:
    """A hostile model file, reference audio and voice prompt written into ``folder``."""
    kind = draw(st.sampled_from(["gguf", "package", "safetensors", "pth"]))
    pool = {"gguf": seeds.gguf_seeds, "package": seeds.package_seeds, "safetensors": seeds.safetensors_seeds,
            "pth": seeds.torch_seeds}[kind]()
    model = folder / f"model.{'gguf' if kind == 'package' else kind}"
    model.write_bytes(draw(mutated(pool, max_edits=3, focus=512))[1])
    name, audio = draw(mutated(seeds.audio_seeds(), max_edits=3, focus=128))
    ref = folder / f"ref.{'wav' if name.startswith('wav') else name}"
    ref.write_bytes(audio)
    prompt = folder / "voice.prompt"
    prompt.write_bytes(draw(mutated(seeds.torch_seeds(), max_edits=2, focus=512))[1])
    return {"model": model, "ref": ref, "prompt": prompt}


def options(draw: st.DrawFn, flag: str) -> list[str]:
    out = []
    for _ in range(draw(st.integers(0, 2))):
        name = draw(st.sampled_from(OPTION_NAMES))
        if flag == "--session-option" and draw(st.booleans()):
            name = f"{draw(st.sampled_from(FAMILIES))}.{name}"
        out += [flag, f"{name}={draw(VALUES)}" if draw(st.integers(0, 5)) else draw(VALUES)]
    return out


@st.composite
def command_lines(draw: st.DrawFn, files: dict[str, Path], out_dir: Path) -> list[str]:
    which = draw(st.integers(0, 9))
    if which == 0:
        return ["inspect", str(files["model"]), *(["--family", draw(st.sampled_from(FAMILIES))]
                                                  if draw(st.booleans()) else [])]
    if which == 1:
        return ["options", "--family", draw(st.one_of(st.sampled_from(FAMILIES), st.text(max_size=8)))]
    if which == 3:
        manifest = out_dir.parent / "batch.jsonl"
        lines = draw(st.lists(manifest_targets.manifest_line(), min_size=1, max_size=3))
        manifest.write_text("\n".join(lines), encoding="utf-8", errors="surrogatepass")
        return ["batch", str(manifest), "--check", "--family", draw(st.sampled_from(FAMILIES)),
                "--out-dir", str(out_dir / "batch")]
    if which == 2:
        return ["codec", "decode", str(files["prompt"]), "--model", str(files["model"]),
                "--out", str(out_dir / "decoded.wav")]
    argv = ["--model", str(files["model"]), "--out", str(out_dir / draw(st.sampled_from(
        ["out.wav", "out.flac", "out.xyz", "out", ".out.wav", "sub/out.wav"])))]
    if draw(st.booleans()):
        argv += ["--family", draw(st.one_of(st.sampled_from(FAMILIES), st.text(max_size=6)))]
    argv += ["--task", draw(st.sampled_from(["tts", "clon", "design", "clone", "x"]))]
    if draw(st.integers(0, 4)):
        argv += ["--text", draw(st.text(max_size=40))]
    if draw(st.booleans()):
        argv += ["--voice-ref", str(files["ref"]), "--reference-text", draw(st.text(max_size=10))]
    if draw(st.integers(0, 3)) == 0:
        argv += ["--voice-prompt", str(files["prompt"])]
    if draw(st.integers(0, 3)) == 0:
        argv += ["--format", draw(st.sampled_from(["wav16", "flac", "ogg", "mp3", "opus", "pcm16", "wav8",
                                                   ""]))]
    if draw(st.integers(0, 3)) == 0:
        argv += ["--mode", draw(st.sampled_from(["offline", "streaming", "x"]))]
    if draw(st.integers(0, 4)) == 0:
        argv += ["--sample-rate", str(draw(st.sampled_from([0, -1, 1, 8000, 2**31, 10**20])))]
    for flag in ("--request-option", "--session-option", "--load-option"):
        argv += options(draw, flag)
    return argv


@given(st.data())
@fuzz_settings("cli")
def test_cli(fuzz_dir: Path, cli_env: None, data: st.DataObject) -> None:
    files = data.draw(hostile_files(fuzz_dir))
    out_dir = fuzz_dir / "out"
    out_dir.mkdir(exist_ok=True)
    before = {p.name for p in out_dir.iterdir()}
    argv = data.draw(command_lines(files, out_dir))
    result = check("cli", lambda: run_cli(argv), files=list(files.values()), limit_s=60)
    code, stderr = result
    if argv[0] in ("inspect", "options", "batch") and code == 0:
        return  # inputs the readers accept (a mutation of data bytes only, a manifest of good lines)
    promise(code, stderr, out_dir, before)
