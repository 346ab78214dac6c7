"""`audiocpp download` against the fake hub: the real CLI, real files, the standard HF cache."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from pathlib import Path

from .conftest import HubEnv, assert_fails, fields

OMNIVOICE_FILES = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                   "audio_tokenizer/config.json", "audio_tokenizer/model.safetensors",
                   "audio_tokenizer/preprocessor_config.json"}


def _repo_with_extras(demo_files: dict[str, bytes]) -> dict[str, bytes]:
    """The demo checkpoint plus files no family reads (they must not be downloaded)."""
    return {**demo_files, "README.md": b"# tiny OmniVoice\n", ".gitattributes": b"*.safetensors filter=lfs\n",
            "extras/samples.bin": os.urandom(50_000)}


def _snapshot_files(path: Path) -> set[str]:
    return {p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file()}


def test_repo_id_downloads_the_family_files_once(env: HubEnv, demo_files: dict[str, bytes]) -> None:
    env.hub.add_repo("org/tiny", _repo_with_extras(demo_files))
    first = env.run("download", "org/tiny")
    assert first.returncode == 0, first.stderr
    out = fields(first.stdout)
    path = Path(out["path"])
    assert path.parent == env.cache / "models--org--tiny" / "snapshots"  # the standard HF cache layout
    assert (path.name == out["commit"]
            and (env.cache / "models--org--tiny" / "refs" / "main").read_text() == out["commit"])
    assert _snapshot_files(path) == OMNIVOICE_FILES == set(env.hub.downloaded())
    assert int(out["downloaded_bytes"]) == int(out["size_bytes"]) == sum(len(demo_files[f])
                                                                         for f in OMNIVOICE_FILES)
    for rel in OMNIVOICE_FILES:
        assert (path / rel).read_bytes() == demo_files[rel]
    assert "downloading org/tiny: 7 file(s)" in first.stderr

    env.hub.clear_log()
    again = env.run("download", "org/tiny")
    assert again.returncode == 0, again.stderr
    assert fields(again.stdout)["path"] == str(path) and fields(again.stdout)["downloaded_bytes"] == "0"
    assert env.hub.downloaded() == [] and "downloading" not in again.stderr

    env.hub.clear_log()
    offline = env.run("download", "org/tiny", extra={"HF_HUB_OFFLINE": "1"})
    assert offline.returncode == 0, offline.stderr
    assert fields(offline.stdout)["path"] == str(path)
    assert not [e for e in env.hub.requests() if "/models/" in e.path or "/resolve/" in e.path]


def test_cache_dir_revision_and_json(env: HubEnv, demo_files: dict[str, bytes], tmp_path: Path) -> None:
    older = {**demo_files, "config.json": demo_files["config.json"].replace(b'"omnivoice"', b'"omnivoice" ')}
    repo = env.hub.add_repo("org/tagged", demo_files, tags={"v1": older})
    cache = tmp_path / "my-cache"
    proc = env.run("download", "org/tagged", "--revision", "v1", "--cache-dir", cache, "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["commit"] == repo.refs["v1"] != repo.refs["main"]
    assert Path(info["path"]) == cache / "models--org--tagged" / "snapshots" / repo.refs["v1"]
    assert set(info["files"]) == OMNIVOICE_FILES and not env.cache.exists()
    assert (Path(info["path"]) / "config.json").read_bytes() == older["config.json"]
    # the name@revision spelling, and the same revision offline from the cache
    same = env.run("download", "org/tagged@v1", "--cache-dir", cache, extra={"HF_HUB_OFFLINE": "1"})
    assert same.returncode == 0 and fields(same.stdout)["commit"] == repo.refs["v1"], same.stderr
    assert_fails(env.run("download", "org/tagged", "--revision", "nope"), 1, "no revision 'nope'")
    assert_fails(env.run("download", "org/tagged@v1", "--revision", "v2"), 2, "--revision")


def test_dropped_connection_resumes_with_a_range_request(env: HubEnv) -> None:
    # huggingface_hub writes in 10 MiB chunks: drop the connection after 12 MB of a 24 MB file.
    blob = os.urandom(24_000_000)
    env.hub.add_repo("org/big", {"weights.gguf": blob, "README.md": b"one GGUF"})
    env.hub.faults.truncate_once[("org/big", "weights.gguf")] = 12_000_000
    proc = env.run("download", "org/big")
    assert proc.returncode == 0, proc.stderr
    gets = [e for e in env.hub.requests("resolve") if e.method == "GET"]
    assert [e.range for e in gets][0] is None and gets[1].range is not None
    start = int(gets[1].range.removeprefix("bytes=").split("-")[0])
    assert 0 < start <= 12_000_000  # resumed where the data stopped, not from zero
    path = Path(fields(proc.stdout)["path"])
    assert path.name == "weights.gguf"  # a repo holding one GGUF resolves to that file
    assert hashlib.sha256(path.read_bytes()).digest() == hashlib.sha256(blob).digest()


def test_killed_download_resumes_with_the_missing_files(env: HubEnv, demo_files: dict[str, bytes]) -> None:
    import threading

    env.hub.add_repo("org/killed", demo_files)
    release = threading.Event()
    env.hub.faults.stall[("org/killed", "model.safetensors")] = release
    proc = env.popen("download", "org/killed", "--no-progress")
    try:
        storage = env.cache / "models--org--killed" / "snapshots"
        others = OMNIVOICE_FILES - {"model.safetensors"}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            snaps = list(storage.glob("*")) if storage.exists() else []
            if snaps and others <= _snapshot_files(snaps[0]) and "model.safetensors" in env.hub.downloaded():
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        else:
            raise AssertionError("the download did not reach the stalled file")
        os.kill(proc.pid, signal.SIGKILL)  # the harshest interruption: no clean-up at all
        proc.wait(timeout=30)
    finally:
        release.set()
        if proc.poll() is None:
            proc.kill()
    assert not (snaps[0] / "model.safetensors").exists()
    env.hub.faults.stall.clear()
    env.hub.clear_log()
    again = env.run("download", "org/killed")
    assert again.returncode == 0, again.stderr
    assert env.hub.downloaded() == ["model.safetensors"]  # the finished files were kept
    path = Path(fields(again.stdout)["path"])
    assert (path / "model.safetensors").read_bytes() == demo_files["model.safetensors"]


def test_failed_file_is_a_clear_error_and_a_rerun_completes(env: HubEnv,
                                                            demo_files: dict[str, bytes]) -> None:
    env.hub.add_repo("org/flaky", demo_files)
    env.hub.faults.status[("org/flaky", "audio_tokenizer/model.safetensors")] = 500
    assert_fails(env.run("download", "org/flaky"), 1, "org/flaky", "run the same command again")
    env.hub.faults.status.clear()
    env.hub.clear_log()
    again = env.run("download", "org/flaky")
    assert again.returncode == 0, again.stderr
    assert env.hub.downloaded() == ["audio_tokenizer/model.safetensors"]


def test_damaged_download_fails_its_checksum(env: HubEnv, demo_files: dict[str, bytes]) -> None:
    env.hub.add_repo("org/damaged", demo_files)
    env.hub.faults.corrupt.add(("org/damaged", "model.safetensors"))
    env.hub.faults.corrupt.add(("org/damaged", "config.json"))
    proc = env.run("download", "org/damaged")
    assert_fails(proc, 1, "2 file(s) of org/damaged failed their checksum", "model.safetensors",
                 "run the command again")
    assert not list(env.cache.glob("models--org--damaged/snapshots/*/model.safetensors"))
    env.hub.faults.corrupt.clear()
    again = env.run("download", "org/damaged")
    assert again.returncode == 0, again.stderr
    path = Path(fields(again.stdout)["path"])
    assert (path / "model.safetensors").read_bytes() == demo_files["model.safetensors"]
    assert (path / "config.json").read_bytes() == demo_files["config.json"]


def test_missing_repo_and_refused_access(env: HubEnv, demo_files: dict[str, bytes]) -> None:
    assert_fails(env.run("download", "org/nope"), 1, "no model 'org/nope'", "HTTP 404", "not a local path")
    env.hub.add_repo("org/private", demo_files, private=True)
    assert_fails(env.run("download", "org/private"), 1, "HTTP 401", "private", "hf auth login", "HF_TOKEN")
    gated = env.hub.add_repo("org/gated", demo_files, gated=True)
    assert_fails(env.run("download", "org/gated"), 1, "HTTP 401", "gated", "accept its conditions",
                 f"{env.hub.url}/org/gated", "hf auth login")
    assert_fails(env.run("download", "org/gated", extra={"HF_TOKEN": "not-the-token"}), 1, "HTTP 403",
                 "the token found was refused")
    assert not list(env.cache.glob("models--org--gated/snapshots/*/*"))
    # the token from the usual places: HF_TOKEN, or the file `hf auth login` writes
    ok = env.run("download", "org/gated", extra={"HF_TOKEN": gated.token})
    assert ok.returncode == 0, ok.stderr
    (env.home / "token").write_text(gated.token)
    ok = env.run("download", "org/private")
    assert ok.returncode == 0, ok.stderr
    assert {e.authorization for e in env.hub.requests("resolve")} >= {f"Bearer {gated.token}"}


def test_offline_with_nothing_cached_says_what_to_do(env: HubEnv) -> None:
    proc = env.run("download", "org/tiny", extra={"HF_HUB_OFFLINE": "1"})
    assert_fails(proc, 1, "not in the Hugging Face cache", str(env.cache), "HF_HUB_OFFLINE",
                 "audiocpp download org/tiny")
    assert not [e for e in env.hub.requests() if "/models/" in e.path or "/resolve/" in e.path]


def test_repo_matching_no_family_names_them_and_what_it_holds(env: HubEnv) -> None:
    env.hub.add_repo("org/notes", {"README.md": b"hi", "weights.npz": b"\0" * 100, "config.json": b"{}"})
    proc = env.run("download", "org/notes")
    assert_fails(proc, 1, "match no installed family", "omnivoice", "voxcpm2", "README.md", "weights.npz",
                 "audiovae.pth")
    assert env.hub.downloaded() == []


def test_several_gguf_files_need_a_file_name(env: HubEnv) -> None:
    files = {"m-q8_0.gguf": os.urandom(1000), "m-f16.gguf": os.urandom(2000), "README.md": b"two"}
    env.hub.add_repo("org/ggufs", files)
    assert_fails(env.run("download", "org/ggufs"), 2, "several GGUF files", "m-q8_0.gguf",
                 "org/ggufs/m-f16.gguf")
    proc = env.run("download", "org/ggufs/m-q8_0.gguf")
    assert proc.returncode == 0, proc.stderr
    path = Path(fields(proc.stdout)["path"])
    assert path.name == "m-q8_0.gguf" and path.read_bytes() == files["m-q8_0.gguf"]
    assert env.hub.downloaded() == ["m-q8_0.gguf"]
    assert_fails(env.run("download", "org/ggufs/other.gguf"), 1, "no file 'other.gguf'", "m-f16.gguf")


def test_not_downloadable_names(env: HubEnv, tmp_path: Path) -> None:
    assert_fails(env.run("download", "omnivoice_q8_0"), 2, "built, not downloaded", "audiocpp package")
    assert_fails(env.run("download", str(tmp_path)), 2, "local path")
    assert_fails(env.run("download", "no_such_package"), 2, "neither a package id nor a repo id")
    assert_fails(env.run("download"), 2, "no model name", "--list")
    assert_fails(env.run("download", "org/x", "--list"), 2, "--list takes no NAME")
