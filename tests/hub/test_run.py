"""Models by name end to end: the real CLI and the Python API synthesize from a fake-hub snapshot
exactly as from the same files in a local folder (after resolution, detection and loading are
the folder's), offline once cached; progress bars only on a terminal."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from .conftest import HubEnv, assert_fails, fields
from .test_download import OMNIVOICE_FILES, _repo_with_extras

TEXT = ["--text", "Hello from the hub.", "--seed", "3"]


@pytest.fixture(scope="module")
def reference_wav(hub, demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The demo checkpoint run from its local folder."""
    home = tmp_path_factory.mktemp("ref-home")
    out = home / "ref.wav"
    proc = HubEnv(hub, home).run("--model", demo_dir, *TEXT, "--out", out)
    assert proc.returncode == 0, proc.stderr
    return out.read_bytes()


def test_repo_id_runs_then_runs_offline_identically(env: HubEnv, demo_files: dict[str, bytes],
                                                   reference_wav: bytes, tmp_path: Path) -> None:
    env.hub.add_repo("org/tiny", _repo_with_extras(demo_files))
    first = env.run("--model", "org/tiny", *TEXT, "--out", tmp_path / "a.wav")
    assert first.returncode == 0, first.stderr
    assert set(env.hub.downloaded()) == OMNIVOICE_FILES
    env.hub.clear_log()
    second = env.run("--model", "org/tiny", *TEXT, "--out", tmp_path / "b.wav", extra={"HF_HUB_OFFLINE": "1"})
    assert second.returncode == 0, second.stderr
    assert not [e for e in env.hub.requests() if "/models/" in e.path or "/resolve/" in e.path]
    assert (tmp_path / "a.wav").read_bytes() == (tmp_path / "b.wav").read_bytes() == reference_wav


def test_package_id_resolves_to_its_repo_and_its_files(env: HubEnv, demo_files: dict[str, bytes],
                                                       reference_wav: bytes, tmp_path: Path) -> None:
    from audiocpp.engine.registry import get_family

    package = next(p for p in get_family("omnivoice").spec.packages if p.id == "omnivoice_safetensors")
    # the repo the spec names, with files the package does not list (an optional one among them)
    env.hub.add_repo("k2-fsa/OmniVoice", {**_repo_with_extras(demo_files), "chat_template.jinja": b"{{ x }}"})
    proc = env.run("--model", "omnivoice_safetensors", *TEXT, "--out", tmp_path / "p.wav")
    assert proc.returncode == 0, proc.stderr
    assert sorted(env.hub.downloaded()) == sorted(package.files)
    assert (tmp_path / "p.wav").read_bytes() == reference_wav
    # the same repo by its id also takes the optional file the family's source reads
    env.hub.clear_log()
    again = env.run("download", "k2-fsa/OmniVoice")
    assert again.returncode == 0, again.stderr
    assert env.hub.downloaded() == ["chat_template.jinja"]


def test_package_id_fetches_only_the_package_files(env: HubEnv) -> None:
    files = {"config.json": b'{"model_type": "arktts"}', "model.safetensors": os.urandom(5000),
             "codec.pth": os.urandom(3000), "tokenizer.json": b'{"model": {}}',
             "tokenizer_config.json": b"{}", "README.md": b"audio8", "onnx/model.onnx": os.urandom(2000),
             "modeling_arktts.py": b"# remote code"}
    env.hub.add_repo("Audio8/Audio8-TTS-Preview-0.6b", files)
    proc = env.run("download", "audio8_tts_preview_0_6b", "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["repo"] == "Audio8/Audio8-TTS-Preview-0.6b" and info["package"] == "audio8_tts_preview_0_6b"
    assert sorted(env.hub.downloaded()) == sorted(info["files"]) == [
        "codec.pth", "config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]


def test_download_list_shows_sizes_and_what_is_cached(env: HubEnv, demo_files: dict[str, bytes]) -> None:
    env.hub.add_repo("k2-fsa/OmniVoice", _repo_with_extras(demo_files))
    env.hub.add_repo("Audio8/Audio8-TTS-Preview-0.1b", {"config.json": b"{}",
                                                        "model.safetensors": b"x" * 1000,
                                                        "codec.pth": b"y" * 500, "tokenizer.json": b"{1}",
                                                        "tokenizer_config.json": b"{2}"})
    assert env.run("download", "audio8_tts_preview_0_1b").returncode == 0
    rows = {r["id"]: r for r in json.loads(env.run("download", "--list", "--json").stdout)}
    from audiocpp.engine.hub import package_index

    assert set(rows) == set(package_index())  # every package id of the installed specs
    assert rows["audio8_tts_preview_0_1b"]["cached"] is True
    assert rows["audio8_tts_preview_0_1b"]["size_bytes"] == 1000 + 500 + 2 + 3 + 3
    assert rows["omnivoice_safetensors"]["cached"] is False
    assert rows["omnivoice_safetensors"]["size_bytes"] == sum(len(demo_files[f]) for f in OMNIVOICE_FILES)
    assert rows["audio8_tts_preview_0_6b"]["size_bytes"] is None  # not on this hub: unknown
    assert (rows["omnivoice_q8_0"]["downloadable"] is False
            and rows["omnivoice_q8_0"]["source"].startswith("converter"))
    text = env.run("download", "--list", extra={"HF_HUB_OFFLINE": "1"}).stdout
    line = next(row for row in text.splitlines() if row.startswith("audio8_tts_preview_0_1b "))
    assert "1.5 KB" in line and " yes " in line and "hf:Audio8/Audio8-TTS-Preview-0.1b" in line
    assert next(row for row in text.splitlines()
                if row.startswith("omnivoice_safetensors ")).split()[2] == "?"


def test_published_package_gguf_runs_by_name(env: HubEnv, demo_dir: Path, reference_wav: bytes,
                                             tmp_path: Path) -> None:
    gguf = tmp_path / "omnivoice-tiny-f32.gguf"
    packaged = env.run("package", "--input", demo_dir, "--out", gguf)
    assert packaged.returncode == 0, packaged.stderr
    env.hub.add_repo("org/tiny-gguf", {gguf.name: gguf.read_bytes(), "README.md": b"our package"})
    proc = env.run("--model", "org/tiny-gguf", *TEXT, "--out", tmp_path / "g.wav")
    assert proc.returncode == 0, proc.stderr
    assert env.hub.downloaded() == [gguf.name]
    from tests.support import read_wav, same_audio

    ours, rate = read_wav(tmp_path / "g.wav")
    assert rate == 24000 and same_audio(ours, read_wav_bytes(reference_wav, tmp_path))


def read_wav_bytes(data: bytes, tmp: Path):
    from tests.support import read_wav

    path = tmp / "ref-copy.wav"
    path.write_bytes(data)
    return read_wav(path)[0]


def test_python_api_loads_names_and_keeps_local_paths(env: HubEnv, demo_files: dict[str, bytes],
                                                      demo_dir: Path, tmp_path: Path) -> None:
    env.hub.add_repo("org/tiny", demo_files)
    script = ("import sys, audiocpp.engine as ac\n"
              "m = ac.load(sys.argv[1])\n"
              "r = m.session('tts').run(ac.TaskRequest(text='Hi.', seed=3))\n"
              "print(f'rate={r.audio.sample_rate} samples={r.audio.num_samples}')\n")
    python = Path(sys.executable)
    run = subprocess.run([python, "-c", script, "org/tiny"], env=env.vars, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr
    assert "rate=24000" in run.stdout and set(env.hub.downloaded()) == OMNIVOICE_FILES
    # a name that is an existing local path stays a path: no hub at all (it is unreachable here)
    work = tmp_path / "work"
    (work / "org").mkdir(parents=True)
    (work / "org" / "tiny").symlink_to(demo_dir, target_is_directory=True)
    env.hub.clear_log()
    local = subprocess.run([python, "-c", script, "org/tiny"],
                           env={**env.vars, "HF_ENDPOINT": "http://127.0.0.1:9"},
                           cwd=work, capture_output=True, text=True, timeout=600)
    assert local.returncode == 0, local.stderr
    assert local.stdout == run.stdout and env.hub.requests() == []


def test_missing_name_in_the_main_command_writes_nothing(env: HubEnv, tmp_path: Path) -> None:
    out = tmp_path / "x.wav"
    assert_fails(env.run("--model", "org/nope", "--text", "hi", "--out", out), 1, "no model 'org/nope'")
    assert_fails(env.run("--model", "Nope", "--text", "hi", "--out", out), 1, "does not exist", "repo id")
    assert not out.exists()


def _run_on_tty(env: HubEnv, *args: str) -> tuple[int, str]:
    """Run the CLI with stderr on a pseudo-terminal; return (exit code, what the terminal showed)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # a real terminal has a size
    proc = subprocess.Popen([str(Path(sys.executable).parent / "audiocpp"), *args], env=env.vars,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    proc.wait(timeout=120)
    os.close(master)
    return proc.returncode, shown.decode(errors="replace")


def test_progress_bars_only_on_a_terminal(env: HubEnv, demo_files: dict[str, bytes]) -> None:
    env.hub.add_repo("org/bars", demo_files)
    env.hub.add_repo("org/nobars", demo_files)
    code, shown = _run_on_tty(env, "download", "org/bars")
    assert code == 0, shown
    assert "100%" in shown and "Fetching 7 files" in shown
    piped = env.run("download", "org/nobars")
    assert piped.returncode == 0 and fields(piped.stdout)["files"] == "7"
    assert "%" not in piped.stderr and "Fetching" not in piped.stderr
    assert piped.stderr.startswith("downloading org/nobars: 7 file(s)")
