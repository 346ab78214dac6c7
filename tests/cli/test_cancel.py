"""The one cancellation path of the command line (engine/execution/watch.py, issue 46): Ctrl-C and SIGTERM
cancel the running job and exit 130 / 143 with one line that says what was kept; a deadline (--timeout)
passes as an error, exit 124. The real CLI as a subprocess on the demo model, a long text so that it is
still synthesizing; no partial output either way."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli.conftest import CHUNKED, cli_env
from tests.support import cli_path, sigint_restored

TEXT = " ".join(f"This is sentence number {i} of a long text." for i in range(30))


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("sig, status, word", [(signal.SIGINT, 130, "interrupted"),
                                               (signal.SIGTERM, 143, "terminated")])
def test_a_signal_mid_synthesis_cancels_and_writes_nothing(tmp_path: Path, sig: int, status: int,
                                                           word: str) -> None:
    out = tmp_path / "all.wav"
    proc = subprocess.Popen(
        [str(cli_path()), "--family", "omnivoice", "--mode", "streaming", "--text", TEXT, "--out", str(out),
         *CHUNKED, "-r", "num_inference_steps=64"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(),
        preexec_fn=sigint_restored,
    )
    try:
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if line.startswith("event=audio index=0"):  # the job runs: its first sentence is out
                break
        else:
            raise AssertionError("no audio event:\n" + "".join(seen))
        sent = time.monotonic()
        proc.send_signal(sig)
        stdout, rest = proc.communicate(timeout=120)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = "".join(seen) + rest
    assert proc.returncode == status, stderr
    assert "Traceback" not in stderr and "audio_out=" not in stdout
    lines = [ln for ln in stderr.splitlines() if ln.startswith(word)]
    assert lines == [f"{word}: --out {out} was not written"], stderr  # one line, said once
    assert took < 30, f"the cancelled job took {took:.1f} s to end"
    assert _files(tmp_path) == [], "a partial or temporary output was left"


def test_a_deadline_passes_as_an_error_with_status_124(tmp_path: Path) -> None:
    out, chunks = tmp_path / "all.wav", tmp_path / "chunks"
    proc = subprocess.run(
        [str(cli_path()), "--family", "omnivoice", "--mode", "streaming", "--text", TEXT, "--out", str(out),
         "--out-dir", str(chunks), *CHUNKED, "-r", "num_inference_steps=64", "--timeout", "1.5"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, env=cli_env(), timeout=300,
    )
    assert proc.returncode == 124, proc.stderr
    assert "error: the deadline of 1.5 s passed" in proc.stderr
    assert "hint: give it more time (--timeout SECONDS)" in proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert not out.exists() and not chunks.exists(), "a failed run leaves no partial output"
    assert _files(tmp_path) == []


def test_a_timeout_must_be_positive(tmp_path: Path) -> None:
    proc = subprocess.run([str(cli_path()), "--family", "omnivoice", "--text", "hi", "--out",
                           str(tmp_path / "a.wav"), "--timeout", "0"],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, env=cli_env(),
                          timeout=120)
    assert proc.returncode == 2 and "--timeout" in proc.stderr, proc.stderr
