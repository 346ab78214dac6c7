"""PyTorch checkpoints (``.pth``/``.bin``/``.pt``) read with ``torch.load(weights_only=True)`` only.

Arbitrary pickled objects are never unpickled: a file that needs more than tensors and
plain containers is refused with a message. ``mmap=True`` is used when the file is in the
zip format, so tensors are not read into memory until used.
"""

from __future__ import annotations

import io
import os
import pickle
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from ..errors import ModelError
from .memory_source import MemorySource
from .source import still_whole

#: Top-level keys whose value is the state dict in training checkpoints.
WRAPPER_KEYS = ("state_dict", "model", "model_state_dict", "module", "generator")


def load_torch_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of ``path``; unwraps ``{"state_dict": {...}}``-style wrappers."""
    return _unwrap(load_weights_only(path), path)


def load_weights_only(path: Path, *, mmap: bool = True) -> Any:
    """``torch.load(path, weights_only=True)`` with every failure a ModelError, a zip checkpoint
    memory-mapped (``mmap``) after its records are checked, and a legacy one read so that no
    length in the file makes torch allocate past the file's size."""
    if not path.is_file():
        raise ModelError(f"{path} does not exist" if not path.exists() else f"{path} is not a file")
    kwargs: dict[str, Any] = {"map_location": "cpu", "weights_only": True}
    # torch.load takes a file for a zip archive by its first bytes only (zipfile.is_zipfile finds a
    # directory anywhere): decided the same way, a damaged archive never reaches torch's legacy reader
    archive = _starts_with(path, b"PK\x03\x04")
    if archive and not zipfile.is_zipfile(path):
        raise ModelError(f"{path} is a damaged PyTorch checkpoint (a zip archive without its directory)",
                         hint="the file is probably truncated; download it again")
    if not archive and not _starts_with(path, b"\x80"):
        raise ModelError(f"{path} is not a PyTorch checkpoint (neither torch.save's zip archive nor a "
                         "pickle)",
                         hint="pass a .pth/.bin/.pt file written by torch.save, or another weights format")
    try:
        if archive:
            _check_archive(path)
            obj = torch.load(path, mmap=mmap, **kwargs)
        else:  # the legacy (pre-1.6) format, read through a reader that never asks for more than the
            # file holds
            with _CappedReader(open(path, "rb", buffering=0)) as fh:  # noqa: SIM115
                obj = torch.load(fh, **kwargs)
    except pickle.UnpicklingError as exc:
        why = _unpickler_reason(str(exc))
        if not why.startswith("Unsupported global"):
            raise ModelError(f"{path} is not a readable PyTorch checkpoint (a damaged pickle: {why})",
                             hint="the file is probably truncated or not a torch.save file; download it "
                             "again",
                             ) from None
        raise ModelError(
            f"{path} cannot be loaded safely: it holds Python objects other than tensors ({why})",
            hint="audiocpp never unpickles arbitrary objects; convert the checkpoint to safetensors in "
            "an environment you trust (e.g. safetensors.torch.save_file(state_dict, 'model.safetensors'))",
        ) from None
    except MemoryError:
        raise
    except Exception as exc:  # a malformed pickle raises anything (IndexError, TypeError, KeyError...)
        raise ModelError(
            f"{path} is not a readable PyTorch checkpoint ({type(exc).__name__}: {str(exc)[:200]})",
            hint="the file is probably truncated or not a torch.save file; download it again",
        ) from None
    return obj


def _starts_with(path: Path, magic: bytes) -> bool:
    """Whether the file opens with ``magic``: a zip archive's local header, or a legacy torch file's
    pickle PROTO opcode (protocol 2 and above)."""
    with open(path, "rb") as fh:
        return fh.read(len(magic)) == magic


def _unpickler_reason(message: str) -> str:
    """The one informative line of torch's weights-only refusal (its text around it is advice)."""
    tail = message.split("WeightsUnpickler error:", 1)[-1].strip()
    line = next((part.strip() for part in tail.splitlines() if part.strip()), "") or "refused"
    return line.split(" was not an allowed global")[0][:160]


class _CappedReader(io.BufferedReader):
    """A file whose ``read(n)`` asks for no more than the rest of the file: a pickle's string or
    bytes length is a number from the file, and ``read(2**31)`` would allocate that much first."""

    def read(self, size: int | None = -1) -> bytes:
        if size is not None and size > 0:
            size = min(size, max(0, os.fstat(self.fileno()).st_size - self.tell()))
        return super().read(size)


#: the records of a torch zip archive are stored uncompressed; this much inflation is refused
MAX_INFLATION = 4


def _check_archive(path: Path) -> None:
    """Refuse a zip whose records inflate far beyond the file (torch reads a record whole)."""
    with zipfile.ZipFile(path) as archive:
        declared = sum(info.file_size for info in archive.infolist())
    size = path.stat().st_size
    if declared > MAX_INFLATION * size + (1 << 20):
        raise ModelError(f"{path} is not a plausible PyTorch checkpoint: its records claim {declared} bytes "
                         f"uncompressed in a {size}-byte file",
                         hint="torch.save stores records uncompressed; get the original checkpoint")


def _tensors(obj: Mapping) -> dict[str, torch.Tensor]:
    return {str(k): v for k, v in obj.items() if isinstance(v, torch.Tensor)}


def _nested(obj: Mapping) -> dict[str, torch.Tensor]:
    """A dict of sub-state-dicts (hexgrad's Kokoro: ``{"bert": {...}, "decoder": {...}}``) as one state
    dict named ``<key>.<name>``; empty unless every value is a dict of tensors."""
    if not obj or not all(isinstance(v, Mapping) and _tensors(v) for v in obj.values()):
        return {}
    return {f"{key}.{name}": t for key, sub in obj.items() for name, t in _tensors(sub).items()}


def _unwrap(obj: Any, path: Path) -> dict[str, torch.Tensor]:
    if isinstance(obj, Mapping):
        for key in WRAPPER_KEYS:
            inner = obj.get(key)
            if isinstance(inner, Mapping) and _tensors(inner):
                return _tensors(inner)
        found = _tensors(obj)
        if found:
            return found
        nested = _nested(obj)
        if nested:
            return nested
    raise ModelError(
        f"{path} holds no state dict (a top-level dict of tensors, one under "
        f"{', '.join(repr(k) for k in WRAPPER_KEYS)}, or a dict of such dicts); found {type(obj).__name__}",
        hint="pass the checkpoint file that holds the model weights",
    )


class TorchSource(MemorySource):
    """A torch checkpoint's state dict. Non-tensor entries (epoch, config...) are ignored."""

    format = "pytorch"

    def __init__(self, path: str | Path) -> None:
        super().__init__(load_torch_state_dict(Path(path)), path=Path(path))
        self._size = self.path.stat().st_size  # zip checkpoints stay memory-mapped: see get()

    def get(self, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
        if name in self._tensors:
            still_whole(self.path, self._size)  # reading a mapped page past a cut end is a SIGBUS
        return super().get(name, dtype)
