#!/usr/bin/env python3
"""Write an Audio8 TTS snapshot folder as audio.cpp's ``audio8_tts`` package GGUF (our own writer
of that layout, for tests; ``docs/families/audio8_tts.md``, "Layouts", describes it).

audio.cpp's two steps, reproduced:

1. ``convert_audio8_tts_codec.py``: ``codec.pth`` -> ``codec.safetensors`` with both weight-norm
   styles fused into plain weights in float32 numpy, ``g * v / sqrt(sum(v^2))`` over every axis
   but 0 (``*.parametrizations.weight.original0/1`` -> ``*.weight``, ``*.weight_g/_v`` ->
   ``*.weight``); every other entry kept.
2. ``audiocpp_gguf --input model_weights=model.safetensors --input codec_weights=codec.safetensors
   --root <folder>``: namespaces ``model_weights/`` and ``codec_weights/``, logical names in
   ``audiocpp.tensor_names`` (physical ``_audiocpp.<i>`` when 64 bytes or longer), every non-weight
   file of the folder under 64 MiB embedded (config, tokenizer, ``*.py``).

Usage: python tools/audio8_tts/convert_audiocpp.py SNAPSHOT_DIR OUT.gguf [--type f32|f16|bf16|q8_0]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import torch

SKIP_SUFFIXES = (".safetensors", ".gguf", ".bin", ".pt", ".pth")
MAX_FILE = 64 * 1024 * 1024


def fuse_codec(path: Path) -> dict[str, np.ndarray]:
    """audio.cpp's codec fusion (numpy float32), from a ``codec.pth`` state dict."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    if "state_dict" in state:
        state = state["state_dict"]
    tensors = {k: v.detach().to(torch.float32).numpy() if v.is_floating_point() else v.numpy()
               for k, v in state.items()}
    out: dict[str, np.ndarray] = {}
    for name, value in tensors.items():
        if name.endswith(".parametrizations.weight.original0"):
            base = name[: -len(".parametrizations.weight.original0")]
            direction = tensors[f"{base}.parametrizations.weight.original1"]
            out[f"{base}.weight"] = _fuse(value, direction)
        elif name.endswith(".weight_g"):
            base = name[: -len("_g")]
            out[base] = _fuse(value, tensors[f"{base}_v"])
        elif not name.endswith((".parametrizations.weight.original1", ".weight_v")):
            out[name] = value
    return out


def _fuse(magnitude: np.ndarray, direction: np.ndarray) -> np.ndarray:
    d = direction.astype(np.float32)
    norm = np.sqrt(np.sum(d ** 2, axis=tuple(range(1, d.ndim)), keepdims=True))
    return np.ascontiguousarray(magnitude.astype(np.float32) * d / norm)


def embedded_files(folder: Path) -> dict[str, Path]:
    files = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.name.endswith(SKIP_SUFFIXES) and path.stat().st_size < MAX_FILE:
            files[path.relative_to(folder).as_posix()] = path
    return files


def write_audiocpp_package(folder: Path, out: Path, weight_type: str = "f32", *,
                           overwrite: bool = True) -> Path:
    from safetensors.numpy import save_file

    from audiocpp.engine.packaging import PackagePlan, write_package
    from audiocpp.engine.weights import SafetensorsSource
    from audiocpp.families.audio8_tts import plugin

    folder, out = Path(folder), Path(out)
    with tempfile.TemporaryDirectory() as tmp:
        codec = Path(tmp) / "codec.safetensors"
        save_file(fuse_codec(folder / "codec.pth"), str(codec), metadata={"format": "pt"})
        plan = PackagePlan(
            family="audio8_tts",
            namespaces={"model_weights": SafetensorsSource(folder / "model.safetensors"),
                        "codec_weights": SafetensorsSource(codec)},
            files=dict(embedded_files(folder)),
            spec=plugin.spec,
            source_paths={"model_weights": "model.safetensors", "codec_weights": "codec.safetensors"},
            name=folder.name,
            source_format="packed",
        )
        write_package(plan, out, weight_type, overwrite=overwrite)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--type", default="f32")
    args = parser.parse_args()
    print(write_audiocpp_package(args.folder, args.out, args.type))


if __name__ == "__main__":
    main()
