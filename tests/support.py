"""Test helpers: run the real CLI as a subprocess, find the upstream reference virtualenvs.

Reference virtualenvs are built by ``tools/reference_envs/<name>.sh`` into
``.ref-envs/<name>`` (``bin/test`` builds them all). A parity test that finds its env
missing fails with the command to build it; set ``AUDIOCPP_SKIP_PARITY=1`` to skip
parity tests instead (never in CI).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
REF_ENVS = Path(os.environ.get("AUDIOCPP_REF_ENVS", REPO / ".ref-envs"))


def cli_path() -> Path:
    return Path(sys.executable).parent / "audiocpp"


def sigint_restored() -> None:
    """``preexec_fn`` for a child a test sends Ctrl-C (SIGINT): its handler back to the default. A
    suite started in the background (``pytest &``, a CI job) runs with SIGINT ignored, children
    inherit that, and Python then installs no KeyboardInterrupt handler at all."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_cli(*args: str | Path, input: str | None = None, cwd: Path | None = None,
            env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run the installed ``audiocpp`` console script; never raises on a non-zero exit."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("AUDIOCPP_DEBUG", None)
    return subprocess.run(
        [str(cli_path()), *[str(a) for a in args]],
        input=input if input is not None else "",
        capture_output=True,
        text=True,
        cwd=cwd,
        env=full_env,
        timeout=timeout,
    )


def reference_python(name: str) -> Path:
    """The interpreter of reference env ``name``, or fail/skip with the fix."""
    python = REF_ENVS / name / "bin" / "python"
    if not python.exists():
        message = (f"reference env {name!r} is missing ({python}); build it with "
                   f"`bash tools/reference_envs/{name}.sh` (bin/test does this)")
        if os.environ.get("AUDIOCPP_SKIP_PARITY") == "1":
            pytest.skip(message)
        pytest.fail(message)
    return python


def run_reference(name: str, script: Path, *args: str | Path, timeout: float = 1800,
                  env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``script`` with reference env ``name``; the script prints one JSON object last."""
    python = reference_python(name)
    full_env = {**os.environ, "PYTHONHASHSEED": "0", **(env or {})}
    for key in ("PYTHONPATH", "VIRTUAL_ENV"):
        full_env.pop(key, None)
    proc = subprocess.run([str(python), str(script), *[str(a) for a in args]], capture_output=True,
                          text=True, timeout=timeout, env=full_env)
    if proc.returncode != 0:
        raise AssertionError(f"reference script {script.name} failed ({proc.returncode}):\n"
                             f"{proc.stderr[-4000:]}")
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    return json.loads(lines[-1]) if lines else {}


def cli_ok(*args: str | Path) -> str:
    """Run the CLI, assert success, return stdout + stderr."""
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout + proc.stderr


def read_wav(path: Path):
    """(float32 samples, sample rate) of an audio file written by the CLI."""
    import soundfile as sf

    data, rate = sf.read(path, dtype="float32")
    return data, rate


def same_audio(a, b, tol: float = 1e-5) -> bool:
    """Equal up to the thread-count noise between a CLI process and this one (~1e-7)."""
    import numpy as np

    return a.shape == b.shape and float(np.abs(a - b).max()) <= tol


def voice_like_signal(seed: int, n: int, rate: int):
    """A deterministic voice-like test signal: two harmonics with AM and a little noise (float32)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    t = np.arange(n) / rate
    f0 = rng.uniform(120, 300)
    wave = 0.4 * np.sin(2 * np.pi * f0 * t) + 0.2 * np.sin(2 * np.pi * 2.3 * f0 * t + 0.5)
    wave *= 0.6 + 0.4 * np.sin(2 * np.pi * 4.0 * t)
    return (wave + rng.normal(0, 0.02, n)).astype(np.float32)


def one_torch_thread():
    """Body of a module-scoped fixture: one torch thread while the module runs, as the
    reference runs; steadier timings and sums on shared CPUs."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def unfold_hubert_pos_conv(path: Path) -> None:
    """Store OmniVoice's HuBERT positional conv as upstream stores it (weight norm, ``original0`` /
    ``original1``, dim 2), which omnivoice.cpp's layout folds; the demo checkpoint holds it folded."""
    from safetensors.torch import load_file, save_file

    state = load_file(str(path))
    stem = "semantic_model.encoder.pos_conv_embed.conv"
    weight = state.pop(f"{stem}.weight")
    state[f"{stem}.parametrizations.weight.original0"] = weight.norm(dim=(0, 1), keepdim=True)
    state[f"{stem}.parametrizations.weight.original1"] = weight
    save_file(state, str(path), metadata={"format": "pt"})


def setup_checkout(tmp_path: Path, fake_python: str) -> tuple[Path, Path]:
    """A checkout holding tools/setup_env.sh and the files its stamp hashes, and ``fake_python`` (a
    script standing in for python3) beside it: ``(root, python)``."""
    import shutil

    root = tmp_path / "checkout"
    (root / "tools").mkdir(parents=True)
    shutil.copy(REPO / "tools" / "setup_env.sh", root / "tools" / "setup_env.sh")
    for name in ("pyproject.toml", "setup.py"):
        shutil.copy(REPO / name, root / name)
    fake = tmp_path / "python3"
    fake.write_text(fake_python)
    fake.chmod(0o755)
    return root, fake
