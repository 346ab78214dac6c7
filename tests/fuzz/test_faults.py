"""Faults around the parsers: a disk that fills while writing audio or a package, a kill during
``audiocpp package``, a model file cut short while memory-mapped, an output folder that cannot
be written. Every case: no partial file (nor temporary file) left, one clear message, the
source untouched, and no crash (a SIGBUS would end the process with -7).

The small disk is a real tmpfs mounted in a private user and mount namespace (``unshare``),
so a write fails with ENOSPC as on a full disk; where namespaces are not allowed, the same
runs use a file-size limit (``RLIMIT_FSIZE``: the write fails with EFBIG), which exercises the
same code paths. The read-only folder needs the namespace (root ignores file permissions) or
a non-root user.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from functools import cache
from pathlib import Path

import pytest

from tests.support import cli_path, sigint_restored

from .harness import fingerprint

TEXT = "Hello there, this is a fault test."


@cache
def namespaces() -> bool:
    """Can this machine mount a tmpfs in a private user+mount namespace? (AUDIOCPP_FUZZ_NO_NAMESPACES=1
    takes the RLIMIT_FSIZE path instead, to test it.)"""
    if os.environ.get("AUDIOCPP_FUZZ_NO_NAMESPACES") == "1":
        return False
    with tempfile.TemporaryDirectory() as folder:
        try:
            proc = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                                   'mount -t tmpfs -o size=16k tmpfs "$0"', folder],
                                  capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return proc.returncode == 0


def run_limited(args: list[str | Path], disk: Path, *, size_kb: int, read_only: bool = False,
                timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run ``audiocpp ARGS`` with ``disk`` a ``size_kb`` KiB tmpfs (read-only if asked), or with
    writes limited to ``size_kb`` KiB per file where namespaces are not available."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("AUDIOCPP_DEBUG", None)
    command = [str(cli_path()), *[str(a) for a in args]]
    if namespaces():
        options = f"size={size_kb}k" + (",ro" if read_only else "")
        command = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                   f'mount -t tmpfs -o {options} tmpfs "$0" && exec "$@"', str(disk), *command]
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    if read_only:
        pytest.skip("no user namespaces here to mount a read-only folder")

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size_kb * 1024, size_kb * 1024))

    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout,
                          preexec_fn=limit, stdin=subprocess.DEVNULL)


def one_message(proc: subprocess.CompletedProcess[str], code: int | tuple[int, ...], *words: str) -> None:
    codes = (code,) if isinstance(code, int) else code
    assert proc.returncode in codes, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    for word in words:
        assert word in proc.stderr, proc.stderr


@pytest.fixture(scope="module")
def demo() -> Path:
    from audiocpp.engine.registry import get_family

    return get_family("omnivoice").demo_model_path()


def _on_disk(folder: Path) -> list[str]:
    """What a run left in the folder (seen from outside the namespace: the folder itself)."""
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


# -- a full disk ------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["offline", "streaming"])
def test_disk_full_while_writing_audio(tmp_path: Path, demo: Path, mode: str) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    before = fingerprint(demo / "model.safetensors")
    args = ["--family", "omnivoice", "--model", demo, "--text", TEXT, "--mode", mode,
            "-r", "num_inference_steps=2", "--out", disk / "out.wav"]
    if mode == "streaming":
        args += ["--out-dir", disk / "chunks"]
    proc = run_limited(args, disk, size_kb=8)
    one_message(proc, 1, "cannot write")
    assert "No space left on device" in proc.stderr or "File too large" in proc.stderr
    assert _on_disk(disk) == [] if namespaces() else not list(disk.rglob("*.wav"))
    assert fingerprint(demo / "model.safetensors") == before


def test_disk_full_while_writing_a_package(tmp_path: Path, demo: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    proc = run_limited(["package", "--family", "omnivoice", "--input", demo, "--out", disk / "pkg.gguf"],
                       disk, size_kb=256)
    one_message(proc, 1, "cannot write")
    assert not list(disk.iterdir())


def test_unwritable_output_folder(tmp_path: Path, demo: Path) -> None:
    disk = tmp_path / "ro"
    disk.mkdir()
    proc = run_limited(["--family", "omnivoice", "--model", demo, "--text", TEXT, "--out", disk / "out.wav"],
                       disk, size_kb=64, read_only=True)
    one_message(proc, (1, 2), "out.wav")
    proc = run_limited(["package", "--family", "omnivoice", "--input", demo, "--out", disk / "pkg.gguf"],
                       disk, size_kb=64, read_only=True)
    one_message(proc, (1, 2), "pkg.gguf")
    assert not list(disk.iterdir())


# -- a kill during `audiocpp package` -------------------------------------------------------------
def _package_until_writing(demo: Path, out: Path) -> subprocess.Popen[str]:
    """Start `audiocpp package` and freeze it (SIGSTOP) once its temporary output exists."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    for _ in range(3):
        proc = subprocess.Popen([str(cli_path()), "package", "--family", "omnivoice", "--input", str(demo),
                                 "--out", str(out), "--type", "q8_0"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, stdin=subprocess.DEVNULL,
                                preexec_fn=sigint_restored)
        while proc.poll() is None:
            if any(p.name.endswith(".tmp") for p in out.parent.iterdir()):
                proc.send_signal(signal.SIGSTOP)
                return proc
            time.sleep(0.002)
        out.unlink(missing_ok=True)  # it finished before we saw it writing: try again
    pytest.fail("could not catch `audiocpp package` while it was writing (3 tries)")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_killed_package_leaves_no_partial_file(tmp_path: Path, demo: Path, sig: signal.Signals) -> None:
    out = tmp_path / "pkg" / "model.gguf"
    out.parent.mkdir()
    proc = _package_until_writing(demo, out)
    proc.send_signal(sig)
    proc.send_signal(signal.SIGCONT)
    _, stderr = proc.communicate(timeout=120)
    assert not out.exists(), "a partial package was left under the output name"
    assert "Traceback" not in stderr
    left = [p.name for p in out.parent.iterdir()]
    if sig == signal.SIGKILL:  # nothing runs after SIGKILL: at most the hidden temporary file stays
        assert all(name.startswith(".model.gguf.") and name.endswith(".tmp") for name in left), left
        assert proc.returncode == -signal.SIGKILL
    else:  # SIGTERM (`kill`) and Ctrl-C run the cleanup: the temporary file is removed
        assert left == [], left
        assert proc.returncode == (143 if sig == signal.SIGTERM else 130), (proc.returncode, stderr)
        assert stderr.strip().splitlines()[-1] == ("terminated" if sig == signal.SIGTERM
                                                   else "interrupted"), stderr
    if sig != signal.SIGKILL:
        return
    # the same command then succeeds (the stale hidden file does not get in the way) and reads back whole
    again = subprocess.run([str(cli_path()), "package", "--family", "omnivoice", "--input", str(demo),
                            "--out", str(out), "--type", "q8_0"], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    from audiocpp.engine.weights import open_weights

    assert len(open_weights(out).names()) > 100


SWALLOWED = """
import signal, sys
from audiocpp.cli import main as cli
def native_reader(*args, **kwargs):  # native code that caught the handler's exception and raised its own
    cli._RECEIVED.append(int(sys.argv[1]))
    raise ValueError("could not determine the shape of object type 'torch.storage.UntypedStorage'")
cli.app = native_reader
cli.main(["package"])
"""


@pytest.mark.parametrize(("sig", "code", "line"),
                         [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")])
def test_a_signal_whose_exception_native_code_swallowed_still_ends_as_the_signal(sig: signal.Signals,
                                                                               code: int,
                                                                               line: str) -> None:
    """safetensors' reader turned the KeyboardInterrupt / SIGTERM raised inside it into a ValueError
    (found by the kill test, 1 run in ~20): the CLI ends as the signal, not as an internal error."""
    proc = subprocess.run([sys.executable, "-c", SWALLOWED, str(int(sig))], capture_output=True, text=True,
                          preexec_fn=sigint_restored)
    assert proc.returncode == code, proc.stderr
    assert proc.stderr.strip().splitlines() == [line]


# -- a model file cut short while memory-mapped -----------------------------------------------------
TRUNCATE = """
import sys
from pathlib import Path
from audiocpp.engine.errors import ModelError
from audiocpp.engine.weights import open_weights
path = Path(sys.argv[1])
source = open_weights(path)
names = source.names()
source.get(names[0]).sum()  # the file is open and mapped (safetensors maps on first use)
with open(path, "r+b") as fh:
    fh.truncate(path.stat().st_size // 3)
try:
    for name in names:
        source.get(name).sum()
except ModelError as error:
    print("ModelError:", error.message)
    sys.exit(1)
print("read everything")
"""


@pytest.mark.parametrize("kind", ["gguf", "package", "safetensors", "pth"])
def test_a_model_file_truncated_while_mapped_is_an_error_not_a_crash(tmp_path: Path, kind: str) -> None:
    import numpy as np
    import torch

    tensors = {f"layer{i}.weight": np.full((256, 256), i, np.float32) for i in range(4)}
    path = tmp_path / f"model.{ {'package': 'gguf'}.get(kind, kind) }"
    if kind == "gguf":
        from tests.engine.weights_builders import write_gguf

        write_gguf(path, tensors)
    elif kind == "package":
        from tests.engine.weights_builders import write_package

        write_package(path, {f"ns/{k}": v for k, v in tensors.items()})
    elif kind == "safetensors":
        from safetensors.numpy import save_file

        save_file(tensors, str(path))
    else:
        torch.save({k: torch.from_numpy(v) for k, v in tensors.items()}, path)
    proc = subprocess.run([sys.executable, "-c", TRUNCATE, str(path)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr[-2000:])  # -7 would be SIGBUS
    assert "changed while it was in use" in proc.stdout, proc.stdout
