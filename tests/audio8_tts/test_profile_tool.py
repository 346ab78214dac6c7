"""tools/profile_worker.py (``tools/bench.py <family> --profile``) on the tiny checkpoint, as a
subprocess: every stage is timed and counted, the nested stages' calls follow the loop's structure,
and the custom linears (packed float32, Q8_0 blocks) are counted at their call."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("weights", ["f32", "q8_0"])
def test_profile_worker_counts_every_stage(weights: str, packages: dict[str, Path], tiny) -> None:
    compute = "float32" if weights == "f32" else "auto"
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "profile_worker.py"), "audio8_tts",
                           str(packages[weights]), "--frames", "6", "--repeats", "1",
                           "--compute-dtype", compute],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    stages = {s["name"]: s for s in result["stages"]}
    frames = stages["fast AR (codebooks)"]["calls"]
    assert frames >= 1 and result["audio_s"] > 0
    assert stages["fast AR network"]["calls"] == frames * tiny.config.num_codebooks
    assert stages["slow AR step"]["calls"] == frames - 1
    assert stages["slow AR prefill"]["calls"] == stages["codec decode"]["calls"] == 1
    assert result["nested"] == ["codebook sampling", "fast AR network"]
    for name in ("slow AR prefill", "fast AR network", "codec decode"):
        assert stages[name]["ops"] > 0 and stages[name]["bytes"] > 0
        assert stages[name]["flops"] + stages[name]["half_flops"] > 0, name
    # a parent's counts include its inner stages'
    parent, inner = stages["fast AR (codebooks)"], stages["fast AR network"]
    assert parent["ops"] >= inner["ops"] and parent["bytes"] >= inner["bytes"]
    assert sum(s["seconds"] for s in result["stages"] if s["name"] not in result["nested"]) <= result["wall"]
    assert set(result["rates"]) == {"gemm_float32", "gemm_bfloat16", "read_bandwidth"}


def test_profile_worker_profiles_a_batch(packages: dict[str, Path], tiny) -> None:
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "profile_worker.py"), "audio8_tts",
                           str(packages["f32"]), "--frames", "4", "--repeats", "1", "--batch", "3",
                           "--compute-dtype", "float32"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    stages = {s["name"]: s for s in result["stages"]}
    assert result["batch"] == 3 and result["audio_s"] > 0
    # prompts prefill and the codec decodes per request; a frame's fast AR is one call for all rows
    assert stages["slow AR prefill"]["calls"] == stages["codec decode"]["calls"] == 3
    frames = stages["fast AR (codebooks)"]["calls"]
    assert 1 <= frames <= 4
    assert stages["fast AR network"]["calls"] == frames * tiny.config.num_codebooks


def test_in_place_ops_are_counted_with_their_out_of_place_formula() -> None:
    """The channels-last codec adds each conv tap with ``addmm_``: its FLOPs are addmm's."""
    import torch
    from torch.utils.flop_counter import flop_registry

    sys.path.insert(0, str(REPO))
    from tools.profile_worker import flop_formula

    assert flop_formula(torch.ops.aten.addmm_, flop_registry) is flop_registry[torch.ops.aten.addmm]
    assert flop_formula(torch.ops.aten.mm, flop_registry) is flop_registry[torch.ops.aten.mm]
    assert flop_formula(torch.ops.aten.add_, flop_registry) is None
