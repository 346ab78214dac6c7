"""What a new user met on a fresh clone (issue 26), each through the real CLI: text that is not
UTF-8, a clone without a reference or without the transcript its family needs, a file that is no
voice prompt, ``--out`` a folder, all refused before the model loads (the loader's ``note:`` line
about the demo model, printed just before loading, never appears); ``--version``; shell
completion; ``audiocpp kernels``; ``bin/test``'s totals line."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import audiocpp
from tests.support import REPO, cli_path, run_cli

LOADING = "note: no --model given"


def _refused_before_loading(proc: subprocess.CompletedProcess, needle: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr, proc.stderr
    assert LOADING not in proc.stderr and "warning:" not in proc.stderr and "Traceback" not in proc.stderr


def test_text_that_is_not_utf8_is_refused_before_loading(tmp_path: Path) -> None:
    latin1 = "café au lait".encode("latin-1")
    env = {k: v for k, v in os.environ.items() if k != "AUDIOCPP_DEBUG"}
    out = tmp_path / "x.wav"
    as_flag = subprocess.run([str(cli_path()), "--family", "omnivoice", "--text", latin1, "--out", str(out)],
                             capture_output=True, env=env, timeout=120)
    on_stdin = subprocess.run([str(cli_path()), "--family", "omnivoice", "--out", str(out)], input=latin1,
                              capture_output=True, env=env, timeout=120)
    for proc, needle in ((as_flag, "--text is not UTF-8"), (on_stdin, "the text on stdin is not UTF-8")):
        _refused_before_loading(subprocess.CompletedProcess(proc.args, proc.returncode, "",
                                                            proc.stderr.decode()), needle)
    assert not out.exists()


@pytest.fixture(scope="module")
def long_reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("refs") / "long.wav"
    sf.write(path, 0.1 * np.random.default_rng(0).standard_normal(25 * 16000).astype(np.float32), 16000)
    return path


def test_clone_inputs_are_refused_before_loading(long_reference: Path, tmp_path: Path) -> None:
    out = str(tmp_path / "x.wav")
    no_reference = run_cli("--family", "omnivoice", "--task", "clon", "--text", "Hi.", "--out", out)
    _refused_before_loading(no_reference, "task 'clon' needs a reference voice")
    # 25 s over the 20 s cap, no transcript: OmniVoice needs one, so no "cutting" warning comes first
    no_transcript = run_cli("--family", "omnivoice", "--task", "clon", "--voice-ref", long_reference,
                            "--text", "Hi.", "--out", out)
    _refused_before_loading(no_transcript, "cloning with OmniVoice needs --reference-text")


def test_a_file_that_is_not_a_voice_prompt_is_named_as_such(tmp_path: Path) -> None:
    junk = tmp_path / "random.bin"
    junk.write_bytes(np.random.default_rng(1).integers(0, 256, 3000, dtype=np.uint8).tobytes())
    proc = run_cli("--family", "omnivoice", "--task", "clon", "--voice-prompt", junk, "--text", "Hi.",
                   "--out", tmp_path / "x.wav")
    _refused_before_loading(proc, "is not a voice prompt")
    assert "not a PyTorch checkpoint (neither torch.save's zip archive nor a pickle)" in proc.stderr
    inspected = run_cli("inspect", junk)
    assert inspected.returncode == 1 and "is not a PyTorch checkpoint" in inspected.stderr
    assert "weights_only" not in inspected.stderr + proc.stderr  # not torch's advice, cut mid-sentence


def test_out_a_folder_is_called_a_folder(tmp_path: Path) -> None:
    proc = run_cli("--family", "omnivoice", "--text", "Hi.", "--out", tmp_path)
    _refused_before_loading(proc, f"--out {str(tmp_path)!r} is a folder")
    assert "extension" not in proc.stderr


def test_version_comes_from_the_package_metadata() -> None:
    version = importlib.metadata.version("audiocpp")
    assert audiocpp.__version__ == version
    for flag in ("--version", "-V"):
        proc = run_cli(flag)
        assert proc.returncode == 0 and proc.stdout.strip() == f"audiocpp {version}", proc.stderr


def test_shell_completion_completes_flags_subcommands_and_families() -> None:
    def complete(shell: str, words: str, **extra: str) -> str:
        env = {**os.environ, "_AUDIOCPP_COMPLETE": f"complete_{shell}", **extra}
        if shell == "bash":
            env |= {"COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) - 1)}
        else:
            env["_TYPER_COMPLETE_ARGS"] = words
        proc = subprocess.run([str(cli_path())], capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    assert complete("bash", "audiocpp --fam").split() == ["--family"]
    assert complete("bash", "audiocpp --family vox").split() == ["voxcpm1", "voxcpm2"]
    assert "serve" in complete("zsh", "audiocpp ser")
    assert "--family" in complete("fish", "audiocpp --fami", _TYPER_COMPLETE_FISH_ACTION="get-args")
    for shell in ("bash", "zsh", "fish"):
        script = run_cli("--show-completion", shell)
        assert script.returncode == 0 and "_AUDIOCPP_COMPLETE" in script.stdout, (shell, script.stderr)


def test_kernels_subcommand_reports_every_kernel() -> None:
    from audiocpp.engine.nn.kernels import kernels

    proc = run_cli("kernels")
    names = [kernel.name for kernel, _ in kernels()]
    cpu, *lines = proc.stdout.splitlines()
    assert re.fullmatch(r"CPU: \w+ CPU, best level \w+(, held to \w+ by AUDIOCPP_CPU_ISA)?: kernels at \w+, "
                        r"bfloat16 (in hardware|emulated .+)", cpu), cpu
    assert [line.split(":")[0] for line in lines] == names, proc.stdout
    for line in lines:
        state = r"(ready \(\d+\.\d s\): \w+ \(.+\)|not used on this machine: .+|not built: .+)"
        assert re.fullmatch(r"\w+: " + state + r"; written for [\w, ]+", line), line
    assert proc.returncode == (1 if any(": not built" in line for line in lines) else 0), proc.stderr


def test_bin_test_says_what_it_installs_and_ends_with_the_totals() -> None:
    header = (REPO / "bin" / "test").read_text()
    assert "chromium" in header and "apt-get" in header and ".ref-envs" in header
    proc = subprocess.run([str(REPO / "bin" / "test"), "-q", "tests/engine/test_layers.py::"
                           "test_the_checks_catch_a_cycle_and_each_upward_import", "-p", "no:cacheprovider"],
                          capture_output=True, text=True, timeout=900, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[bin/test] sets up .venv" in proc.stderr
    assert re.search(r"^1 passed in [\d.]+s$", proc.stdout.strip().splitlines()[-1]), proc.stdout


def test_families_and_metrics_say_what_auto_computes_in_on_this_cpu(tmp_path: Path) -> None:
    from audiocpp.engine.nn.kernels import cpu_isa

    avx2 = cpu_isa.arch() == "x86_64" and cpu_isa.cpu_has(cpu_isa.LEVEL_FLAGS["avx2"])
    env = cpu_isa.LEVEL_ENV["avx2"] if avx2 else {}
    proc = run_cli("families", env=env)
    last = proc.stdout.strip().splitlines()[-1]
    assert proc.returncode == 0 and last.startswith("on this CPU (") and "batches of up to:" in last, last
    if avx2:  # held to AVX2: no bfloat16 units, so float32, with quantized packages kept stored
        assert "bfloat16 emulated" in last and "float32-stored for Q8_0/Q4_0 packages" in last, last
    listing = json.loads(run_cli("families", "--json", env=env).stdout)
    assert {f["family"]: f["max_batch_cpu"] for f in listing["families"]}["omnivoice"] == 1
    run = run_cli("--family", "omnivoice", "--text", "Hi.", "--out", tmp_path / "a.wav", "--metrics", env=env)
    assert run.returncode == 0, run.stderr
    info = dict(line.split("=", 1) for line in run.stdout.splitlines() if "=" in line)
    assert info["compute"] == "float32" and info["cpu_isa"] == ("avx2" if avx2 else cpu_isa.level())
