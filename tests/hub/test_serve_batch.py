"""`audiocpp serve --model ORG/NAME` and `audiocpp batch --model ORG/NAME` download by name through
the one load path (engine.loader), as the main command does: the fake hub's snapshot, the files
the family reads, and the same audio as the same checkpoint in a local folder."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.server.conftest import free_port
from tests.support import read_wav

from .conftest import HubEnv, fields
from .test_download import OMNIVOICE_FILES, _repo_with_extras

TEXT, SEED = "Hello from the hub.", 3


@pytest.fixture(scope="module")
def reference(hub, demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> np.ndarray:
    """The demo checkpoint run by the main command from its local folder."""
    home = tmp_path_factory.mktemp("ref-home")
    out = home / "ref.wav"
    proc = HubEnv(hub, home).run("--model", demo_dir, "--text", TEXT, "--seed", str(SEED), "--out", out)
    assert proc.returncode == 0, proc.stderr
    return read_wav(out)[0]


def test_serve_takes_a_hub_name(env: HubEnv, demo_files: dict[str, bytes], reference: np.ndarray,
                                tmp_path: Path) -> None:
    env.hub.add_repo("org/tiny", _repo_with_extras(demo_files))
    port = free_port()
    proc = env.popen("serve", "--model", "org/tiny", "--port", str(port))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None, proc.communicate()
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the server did not come up"
            time.sleep(0.2)
        assert set(env.hub.downloaded()) == OMNIVOICE_FILES
        names = [m["id"] for m in httpx.get(url + "/v1/models", timeout=10).json()["data"]]
        assert names == ["tiny"]  # a name's last part, as a folder's name
        r = httpx.post(url + "/v1/audio/speech", json={"model": "tiny", "input": TEXT, "seed": SEED,
                                                       "response_format": "wav"}, timeout=300)
        assert r.status_code == 200, r.text
        (tmp_path / "served.wav").write_bytes(r.content)
        served, _ = read_wav(tmp_path / "served.wav")
        assert np.array_equal(served, reference)
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=60)
    assert "downloading org/tiny" in stderr and "audiocpp serve: tiny (omnivoice, 24000 Hz)" in stderr, stderr


def test_batch_takes_a_hub_name(env: HubEnv, demo_files: dict[str, bytes], reference: np.ndarray,
                                tmp_path: Path) -> None:
    env.hub.add_repo("org/tiny", _repo_with_extras(demo_files))
    manifest = tmp_path / "items.jsonl"
    manifest.write_text("".join(json.dumps({"id": f"item{i}", "text": TEXT, "seed": SEED}) + "\n"
                                for i in range(2)))
    out = tmp_path / "out"
    proc = env.run("batch", manifest, "--out-dir", out, "--model", "org/tiny", "--workers", "1",
                   "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert fields(proc.stdout)["done"] == "2"
    assert set(env.hub.downloaded()) == OMNIVOICE_FILES
    for i in range(2):
        assert np.array_equal(read_wav(out / f"item{i}.wav")[0], reference)
