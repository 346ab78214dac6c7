"""Valid seed files for the fuzz targets, built with the builders the other tests use.

Each builder returns ``{name: bytes}``; they are built once per session (``functools.cache``)
in a private temporary folder.
"""

from __future__ import annotations

import atexit
import io
import json
import shutil
import tempfile
from functools import cache
from pathlib import Path

import numpy as np

_ROOT = Path(tempfile.mkdtemp(prefix="audiocpp-fuzz-seeds-"))
atexit.register(shutil.rmtree, _ROOT, ignore_errors=True)


def _tensors() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "w.f32": rng.standard_normal((4, 32)).astype(np.float32),
        "w.f16": rng.standard_normal((2, 32)).astype(np.float16),
        "w.bf16": rng.standard_normal((2, 32)).astype(np.float32),
        "w.q8": rng.standard_normal((2, 64)).astype(np.float32),
        "w.q4": rng.standard_normal((1, 64)).astype(np.float32),
        "w.i32": np.arange(6, dtype=np.int32),
        "w.scalar": np.array([0.5], dtype=np.float32),
    }


@cache
def gguf_seeds() -> dict[str, bytes]:
    from tests.engine.weights_builders import write_gguf

    tensors = _tensors()
    types = {"w.bf16": "BF16", "w.q8": "Q8_0", "w.q4": "Q4_0"}
    meta = {"general.name": "seed", "test.count": 7, "test.tokens": ["a", "b c", "ü"],
            "test.floats": [0.5, 1.5], "general.alignment": 32}
    out = {}
    path = write_gguf(_ROOT / "full.gguf", tensors, metadata=meta, types=types)
    out["full"] = path.read_bytes()
    path = write_gguf(_ROOT / "small.gguf", {"x": np.ones((2, 8), np.float32)})
    out["small"] = path.read_bytes()
    return out


LONG = "weights/model.layers.0.self_attn.some_really_long_module_name.q_proj.weight"


@cache
def package_seeds() -> dict[str, bytes]:
    from tests.engine.weights_builders import write_package

    rng = np.random.default_rng(1)
    tensors = {
        "weights/embed.weight": rng.standard_normal((4, 32)).astype(np.float32),
        LONG: rng.standard_normal((2, 32)).astype(np.float32),
        "weights/scale": np.array(0.25, dtype=np.float32),
        "codec/conv.weight": rng.standard_normal((4, 2, 3)).astype(np.float32),
        "codec/qconv.weight": rng.standard_normal((2, 4, 8)).astype(np.float32),
        "codec/steps": np.arange(6, dtype=np.int64),
    }
    files = {"config.json": b'{"model_type": "x"}', "sub/tokenizer.json": b'{"version": "1.0"}', "empty": b""}
    spec = json.loads(Path(__file__).resolve().parents[2].joinpath("model_specs", "omnivoice.json")
                      .read_text())
    out = {}
    out["blob"] = write_package(_ROOT / "blob.gguf", tensors, files=files, spec=spec,
                                flatten={"codec/conv.weight": (4, 6), "codec/qconv.weight": (2, 32)},
                                types={"codec/qconv.weight": "Q8_0"}).read_bytes()
    out["legacy"] = write_package(_ROOT / "legacy.gguf", {"a/x": np.ones(3, np.float32)}, files=files,
                                  legacy_files=True).read_bytes()
    return out


@cache
def safetensors_seeds() -> dict[str, bytes]:
    import torch
    from safetensors.torch import save

    g = torch.Generator().manual_seed(0)
    state = {"a": torch.randn(3, 4, generator=g), "b": torch.randn(5, generator=g).half(),
             "c": torch.arange(4, dtype=torch.int64), "d": torch.randn(2, 2, generator=g).bfloat16(),
             "e": torch.zeros(0, 3)}
    return {"plain": save(state, metadata={"format": "pt"}), "one": save({"x": torch.ones(2)})}


@cache
def torch_seeds() -> dict[str, bytes]:
    import torch

    g = torch.Generator().manual_seed(0)
    state = {"a": torch.randn(3, 4, generator=g), "b": torch.arange(5), "n": 3}
    out = {}
    buf = io.BytesIO()
    torch.save(state, buf)
    out["zip"] = buf.getvalue()
    buf = io.BytesIO()
    torch.save({"state_dict": state}, buf, _use_new_zipfile_serialization=False)
    out["legacy"] = buf.getvalue()
    return out


@cache
def audio_seeds() -> dict[str, bytes]:
    import soundfile as sf

    rng = np.random.default_rng(0)
    mono = (0.3 * rng.standard_normal(800)).astype(np.float32)
    stereo = (0.3 * rng.standard_normal((600, 2))).astype(np.float32)
    out = {}
    for name, data, fmt, subtype in (
        ("wav16", mono, "WAV", "PCM_16"), ("wav24", stereo, "WAV", "PCM_24"), ("wavf", mono, "WAV", "FLOAT"),
        ("flac", stereo, "FLAC", "PCM_16"), ("ogg", mono, "OGG", "VORBIS"),
    ):
        buf = io.BytesIO()
        sf.write(buf, data, 16000, format=fmt, subtype=subtype)
        out[name] = buf.getvalue()
    if "MP3" in sf.available_formats():
        buf = io.BytesIO()
        try:
            sf.write(buf, np.tile(mono, 4), 16000, format="MP3", subtype="MPEG_LAYER_III")
            out["mp3"] = buf.getvalue()
        except (sf.LibsndfileError, RuntimeError):
            pass
    return out


@cache
def spec_texts() -> dict[str, str]:
    folder = Path(__file__).resolve().parents[2] / "model_specs"
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.json"))
            if p.stem != "schema"}


def seed_dir() -> Path:
    return _ROOT
