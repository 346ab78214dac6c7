"""``open_weights``: the TensorSource for a path, chosen by what the path is."""

from __future__ import annotations

from pathlib import Path

from .. import fs
from ..errors import ModelError
from .source import TensorSource

TORCH_SUFFIXES = (".pth", ".bin", ".pt", ".ckpt")


def open_weights(path: str | Path) -> TensorSource:
    """Open ``path`` as a TensorSource.

    - ``*.gguf``: a package GGUF (``audiocpp.tensor_names`` or architecture ``audiocpp``)
      as a ``PackageSource``, otherwise a plain ``GGUFSource``;
    - ``*.safetensors``; ``*.index.json`` (sharded safetensors or torch checkpoints);
    - ``*.pth`` / ``*.bin`` / ``*.pt`` / ``*.ckpt`` through ``torch.load(weights_only=True)``;
    - a folder: an HF snapshot (``FolderSource``), or a folder holding ``model.gguf``.
    """
    path = Path(path).expanduser()
    if not fs.exists(path):
        raise ModelError(f"weights path {str(path)!r} does not exist", hint="check the path")
    if fs.is_dir(path):
        from .folder import FolderSource, root_checkpoint

        if root_checkpoint(path) is None and (path / "model.gguf").is_file():
            return open_weights(path / "model.gguf")
        return FolderSource(path, open_weights)
    name = path.name.lower()
    if name.endswith(".gguf"):
        return open_gguf(path)
    if name.endswith(".safetensors"):
        from .safetensors_source import SafetensorsSource

        return SafetensorsSource(path)
    if name.endswith(".index.json"):
        from .safetensors_source import ShardedSource

        return ShardedSource(path, open_weights)
    if name.endswith(TORCH_SUFFIXES):
        from .torch_source import TorchSource

        return TorchSource(path)
    from .gguf_file import is_gguf

    if is_gguf(path):
        return open_gguf(path)
    raise ModelError(
        f"{path} has an unknown weights format ({path.suffix or 'no extension'})",
        hint="pass a .gguf, .safetensors, *.safetensors.index.json, .pth/.bin/.pt file or an HF snapshot "
        "folder",
    )


def open_gguf(path: str | Path) -> TensorSource:
    from .gguf_file import GGUFFile
    from .gguf_source import GGUFSource
    from .package import PackageSource, is_package

    file = GGUFFile(path)
    return PackageSource(file) if is_package(file.metadata) else GGUFSource(file)
