"""Ctrl-C (SIGINT) on the real CLI while it streams: exit 130 and one line that says it was
interrupted and what was kept (issue 11, item 5)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import soundfile as sf

from tests.support import cli_path, sigint_restored


def test_sigint_while_streaming_reports_the_chunks_kept(tmp_path: Path) -> None:
    chunks, out = tmp_path / "chunks", tmp_path / "all.wav"
    text = " ".join(f"This is sentence number {i} of a long text." for i in range(30))
    env = {k: v for k, v in os.environ.items() if k != "AUDIOCPP_DEBUG"}
    proc = subprocess.Popen(
        [str(cli_path()), "--family", "omnivoice", "--mode", "streaming", "--text", text,
         "--out-dir", str(chunks), "--out", str(out), "-r", "audio_chunk_threshold=0",
         "-r", "audio_chunk_duration=2", "-r", "num_inference_steps=64"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        preexec_fn=sigint_restored,
    )
    try:
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if line.startswith("event=audio index=0"):
                break
        else:
            raise AssertionError("no audio event:\n" + "".join(seen))
        deadline = time.monotonic() + 60
        while not (chunks / "chunk_0.wav").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        stdout, rest = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = "".join(seen) + rest
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "audio_out=" not in stdout
    line = next(ln for ln in stderr.splitlines() if ln.startswith("interrupted: "))
    kept = sorted(chunks.glob("chunk_*.wav"), key=lambda p: int(p.stem.split("_")[1]))
    assert kept, stderr
    n = len(kept)
    assert f"kept {n} chunk{'s' if n > 1 else ''} in {chunks}" in line, line
    assert kept[-1].name in line and f"--out {out} was not written" in line
    assert not out.exists()
    assert not [p for p in chunks.iterdir() if p.name.startswith(".")], "a temporary file was left"
    for path in kept:  # every chunk it reports is complete
        assert sf.info(str(path)).frames > 0
