"""HF snapshot folders: the root checkpoint plus the folder's sidecar files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from ..errors import ModelError
from .source import TensorInfo, TensorSource

#: Root checkpoints of a snapshot folder, in order of preference.
ROOT_CHECKPOINTS = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
WEIGHT_SUFFIXES = (".safetensors", ".gguf", ".bin", ".pt", ".pth", ".ckpt")
_SKIP_DIRS = {".git", ".cache", "__pycache__", ".huggingface"}
MAX_SIDECAR_FILES = 2000


def sidecar_files(folder: Path) -> dict[str, Path]:
    """Non-weight files under ``folder`` by relative POSIX path (``audio_tokenizer/config.json``)."""
    out: dict[str, Path] = {}
    stack = [folder]
    while stack and len(out) < MAX_SIDECAR_FILES:
        current = stack.pop()
        try:
            entries = sorted(current.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir():
                if entry.name not in _SKIP_DIRS:
                    stack.append(entry)
            elif entry.is_file() and not entry.name.endswith(WEIGHT_SUFFIXES) \
                    and not entry.name.endswith(".index.json"):
                out[entry.relative_to(folder).as_posix()] = entry
    return dict(sorted(out.items()))


def root_checkpoint(folder: Path) -> Path | None:
    for name in ROOT_CHECKPOINTS:
        if (folder / name).is_file():
            return folder / name
    return None


class FolderSource(TensorSource):
    """The root checkpoint of an HF snapshot folder (``model.safetensors``, its sharded
    index, or ``pytorch_model.bin``); ``files`` lists the folder's other files."""

    format = "folder"

    def __init__(self, folder: str | Path, open_checkpoint: Callable[[Path], TensorSource]) -> None:
        self.path = Path(folder)
        checkpoint = root_checkpoint(self.path)
        if checkpoint is None:
            raise ModelError(
                f"{self.path} holds no root checkpoint (looked for {', '.join(ROOT_CHECKPOINTS)})",
                hint="pass the snapshot folder that holds the model weights, or the weights file itself",
            )
        self.checkpoint = checkpoint
        self.inner = open_checkpoint(checkpoint)
        self.metadata = self.inner.metadata
        self.files = sidecar_files(self.path)

    def names(self) -> list[str]:
        return self.inner.names()

    def info(self, name: str) -> TensorInfo:
        return self.inner.info(name)

    def get(self, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
        return self.inner.get(name, dtype)
