"""What a new user meets first (issue 11, items 6-8, 10, 12): the first-run line of the set-up,
the README's examples and Python snippet as written, Python-worded load() errors, short
reprs, the CLI's words (clon), and the random-weights caveat when packaging the demo."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import audiocpp.engine as ac
from tests.support import REPO, cli_ok, run_cli, setup_checkout

README = (REPO / "README.md").read_text(encoding="utf-8")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]+")


def _section(title: str) -> str:
    start = README.index(f"## {title}")
    end = README.find("\n## ", start + 1)
    return README[start: end if end > 0 else None]


# -- item 7: the first bin/audiocpp run says what it is doing ---------------------------------------
FAKE_PYTHON = """#!/usr/bin/env bash
# Stands in for python3 and the venv's python: makes a venv, 'installs' packages, imports anything.
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then mkdir -p "$3/bin"; cp "$0" "$3/bin/python"; exit 0; fi
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then
  d="$(dirname "$0")"; printf '#!/bin/sh\\n' > "$d/audiocpp"; chmod +x "$d/audiocpp"
fi
exit 0
"""


def test_setup_prints_one_line_on_first_run_only(tmp_path: Path) -> None:
    root, fake = setup_checkout(tmp_path, FAKE_PYTHON)
    env = {**os.environ, "PYTHON": str(fake)}

    def setup() -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", str(root / "tools" / "setup_env.sh"), "--quiet"], capture_output=True,
                              text=True, env=env, timeout=60)

    first = setup()
    assert first.returncode == 0, first.stderr
    lines = first.stderr.splitlines()
    assert (len(lines) == 1 and lines[0].startswith("[setup] setting up ")
            and "about a minute" in lines[0]), lines
    again = setup()  # the stamp is current: silent, as every later bin/audiocpp run
    assert again.returncode == 0 and again.stderr == "", again.stderr


# -- item 8: README examples usable without activating the venv ---------------------------------------
def test_readme_says_how_to_run_the_examples() -> None:
    usage = _section("Using it")
    assert ". .venv/bin/activate" in usage and "`bin/audiocpp`" in usage
    assert (REPO / "bin" / "audiocpp").stat().st_mode & 0o111


def test_readme_examples_that_need_no_model_run(tmp_path: Path) -> None:
    """Every example of "Using it" that names no model runs as written (the default model speaks the
    Kokoro ones), in a scratch folder for the files they write."""
    import shlex

    block = _section("Using it").split("```bash", 1)[1].split("```", 1)[0]
    commands = [shlex.split(line, comments=True) for line in block.splitlines()
                if line.startswith("audiocpp ") and "--model" not in line and "download" not in line
                and "package" not in line and "inspect" not in line]
    commands = [[a for a in cmd[1:] if a not in ("[--json]",)] for cmd in commands]
    assert ["families"] in commands and ["options", "--family", "omnivoice"] in commands
    assert any("--voice" in cmd for cmd in commands) and any("--phonemes" in cmd for cmd in commands)
    for args in commands:
        proc = run_cli(*args, cwd=tmp_path)
        assert proc.returncode == 0, (args, proc.stderr)


# -- item 10: the README's Python snippet, Python-worded errors, short reprs ---------------------------
def test_readme_python_snippet_runs_on_the_demo(tmp_path: Path) -> None:
    snippet = README.split("```python", 1)[1].split("```", 1)[0]
    assert 'ac.load(family="omnivoice")' in snippet
    proc = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, cwd=tmp_path,
                          timeout=600, env={k: v for k, v in os.environ.items() if k != "AUDIOCPP_DEBUG"})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("TaskResult(task='tts', mode='offline', audio=AudioBuffer(") and "seed=7" in out
    assert "StreamEvent(kind='audio', index=0" in out and "StreamEvent(kind='final'" in out
    assert "array(" not in out and "tensor(" not in out and len(out) < 2000


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({}, "load() needs a model path or a family"),
    ({"path": "/no/such/model.gguf"}, "does not exist"),
    ({"path": "TMP"}, "cannot tell which family"),
    ({"family": "nope"}, "unknown family 'nope'"),
    ({"family": "voxcpm2"}, "has no demo model"),
    ({"family": "omnivoice", "load_options": {"warp": "1"}}, "load options of omnivoice: device, codec ("),
    ({"path": "TMP", "family": "omnivoice", "load_options": {"codec": "/no/codec.gguf"}}, "codec"),
])
def test_load_errors_speak_python(kwargs: dict, needle: str, tmp_path: Path) -> None:
    kwargs = {k: (str(tmp_path) if v == "TMP" else v) for k, v in kwargs.items()}
    with pytest.raises(ac.AudiocppError) as info:
        ac.load(**kwargs)
    text = str(info.value)
    assert needle in text, text
    assert not FLAG.findall(text), f"CLI flags in a Python error: {FLAG.findall(text)}\n{text}"
    assert info.value.hint, text


def test_the_cli_keeps_its_flags_in_the_same_errors(tmp_path: Path) -> None:
    proc = run_cli("--model", tmp_path, "--text", "Hi.", "--out", tmp_path / "x.wav")
    assert proc.returncode == 1 and "pass --family" in proc.stderr, proc.stderr


def test_records_have_short_reprs() -> None:
    audio = ac.AudioBuffer(np.zeros(48000, np.float32), 24000)
    assert repr(audio) == "AudioBuffer(2.000 s, 24000 Hz, 48000 samples)"
    result = ac.TaskResult(audio=audio, task=ac.Task.CLONE, mode=ac.Mode.STREAMING, chunks=[audio, audio],
                           metrics=ac.Metrics(wall_s=1.0, audio_s=2.0, seed=3),
                           details={"tokens": np.zeros((8, 5000), np.int64)})
    text = repr(result)
    assert text == ("TaskResult(task='clone', mode='streaming', "
                    "audio=AudioBuffer(2.000 s, 24000 Hz, 48000 samples), "
                    "chunks=2, wall_s=1.000, rtf=0.5, seed=3)")
    event = ac.StreamEvent(kind="final", index=2, audio=audio, name="final", result=result)
    assert (repr(event).startswith("StreamEvent(kind='final', index=2, audio=AudioBuffer(2.000 s")
            and "array" not in repr(event))


# -- item 6 and 12: inspect's words; packaging the demo says what to expect -------------------------------
@pytest.fixture(scope="module")
def demo_folder() -> Path:
    from audiocpp.families.omnivoice.demo import demo_checkpoint

    return demo_checkpoint()


def test_inspect_says_clon(demo_folder: Path) -> None:
    stdout = cli_ok("inspect", demo_folder)
    assert "tasks=tts,clon,design" in stdout, stdout


def test_packaging_the_demo_says_random_weights(demo_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "demo-q8_0.gguf"
    stdout = cli_ok("package", "--input", demo_folder, "--type", "q8_0", "--out", out)
    assert out.is_file()
    assert ("demo checkpoint with random weights" in stdout
            and "Judge quantized packages on a real checkpoint" in stdout)
    assert "audio cosine about 0.3" in README  # and the README says it where users look first


def test_a_subcommand_with_family_gives_the_subcommand_help(capsys: pytest.CaptureFixture[str]) -> None:
    from audiocpp.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(["download", "--family", "voxcpm2", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "Usage: audiocpp download" in out and "load options" not in out.lower()
    with pytest.raises(SystemExit):
        main(["--family", "voxcpm2", "--help"])
    assert "packed_linear" in capsys.readouterr().out  # the family's options after the general help
