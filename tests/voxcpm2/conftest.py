"""Fixtures of the VoxCPM2 tests: tiny checkpoints (built once per session), audio files,
our loaded models, and one upstream reference run for every parity case."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
import torch

from tests.support import REPO, one_torch_thread, run_reference, voice_like_signal

from .cases import BF16_CASES, CASES, TOKENIZER_TEXTS, V1_CASES

TOOLS = REPO / "tools" / "voxcpm2"


@pytest.fixture(scope="session")
def checkpoint_tool():
    from tools.voxcpm2 import checkpoint

    return checkpoint


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory: pytest.TempPathFactory, checkpoint_tool) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("voxcpm2-ckpt")
    return {
        "tiny": checkpoint_tool.write_checkpoint(root / "tiny", checkpoint_tool.TINY_V2, seed=1234),
        "tiny_mup": checkpoint_tool.write_checkpoint(root / "tiny_mup", checkpoint_tool.TINY_V2_MUP,
                                                     seed=4321),
        # bf16 weights and config dtype: upstream then computes in bfloat16.
        "tiny_bf16": checkpoint_tool.write_checkpoint(root / "tiny_bf16",
                                                      {**checkpoint_tool.TINY_V2, "dtype": "bfloat16"},
                                                      seed=1234, dtype=torch.bfloat16),
        "tiny_v1": checkpoint_tool.write_checkpoint(root / "tiny_v1", checkpoint_tool.TINY_V1, seed=99),
    }


@pytest.fixture(scope="session")
def tiny_ckpt(checkpoints: dict[str, Path]) -> Path:
    return checkpoints["tiny"]




@pytest.fixture(scope="session")
def audio_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """16 kHz float WAVs (lengths not a whole number of patches) and a 44.1 kHz stereo one."""
    root = tmp_path_factory.mktemp("voxcpm2-audio")
    files = {"ref": root / "ref.wav", "prompt": root / "prompt.wav", "vae": root / "vae.wav",
             "stereo44k": root / "stereo44k.wav"}
    sf.write(files["ref"], voice_like_signal(1, 1234, 16000), 16000, subtype="FLOAT")
    sf.write(files["prompt"], voice_like_signal(2, 1001, 16000), 16000, subtype="FLOAT")
    sf.write(files["vae"], voice_like_signal(3, 980, 16000), 16000, subtype="FLOAT")
    stereo = np.stack([voice_like_signal(4, 2000, 44100), voice_like_signal(5, 2000, 44100)], axis=1)
    sf.write(files["stereo44k"], stereo, 44100, subtype="FLOAT")
    return files


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory, checkpoints: dict[str, Path],
              audio_files: dict[str, Path]) -> dict[str, dict[str, np.ndarray]]:
    """Every upstream result, from one reference process: case name -> arrays."""
    root = tmp_path_factory.mktemp("voxcpm2-ref")
    cases: list[dict[str, Any]] = [
        {"name": c.name, "checkpoint": c.checkpoint, "kind": "generate", "seed": c.seed,
         "streaming": c.streaming, "args": c.upstream_args(audio_files)}
        for c in CASES + BF16_CASES + V1_CASES
    ]
    cases.append({"name": "vae", "checkpoint": "tiny", "kind": "vae", "wav": str(audio_files["vae"])})
    cases.append({"name": "v1_vae", "checkpoint": "tiny_v1", "kind": "vae", "wav": str(audio_files["vae"])})
    cases.append({"name": "tokenize", "checkpoint": "tiny", "kind": "tokenize", "texts": TOKENIZER_TEXTS})
    spec = {"checkpoints": {k: str(v) for k, v in checkpoints.items()}, "cases": cases, "threads": 1}
    spec_path = root / "cases.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    summary = run_reference("voxcpm", TOOLS / "reference.py", spec_path, root / "out")
    results = {name: dict(np.load(root / "out" / f"{name}.npz")) for name in summary["cases"]}
    results["_summary"] = summary
    return results


@pytest.fixture(scope="session")
def loaded(checkpoints: dict[str, Path]):
    """Our models, loaded once: checkpoint name -> LoadedModel."""
    from audiocpp.families.voxcpm2 import plugin

    cache: dict[str, Any] = {}

    def get(name: str = "tiny"):
        """``name`` is a checkpoint name, optionally with ``:unpacked`` (load option packed_linear=false)."""
        if name not in cache:
            base, _, variant = name.partition(":")
            if variant == "unpacked":
                cache[name] = plugin.load(checkpoints[base], {"packed_linear": False})
            elif name == "tiny_v1":
                # No voxcpm1 plugin here: the voxcpm2 model classes on a v1 config.
                from audiocpp.families.voxcpm2.session import VoxCPM2LoadedModel
                from audiocpp.families.voxcpm2.weights import load_parts

                parts = load_parts(checkpoints[name], spec=plugin.spec, expect_architecture="voxcpm")
                cache[name] = VoxCPM2LoadedModel(plugin.spec, checkpoints[name], {}, parts)
            else:
                cache[name] = plugin.load(checkpoints[name])
        return cache[name]

    return get


_one_thread = pytest.fixture(autouse=True, scope="module")(one_torch_thread)
