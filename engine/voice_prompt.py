"""The engine's voice-prompt file: a prepared reference voice, saved for ``--voice-prompt``.

One file layout for every family (``--voice-prompt-out``, ``audiocpp codec encode``, the server's
stored voices): a plain dict written with ``torch.save`` and read back with
``torch.load(weights_only=True)``, so loading never unpickles an object.

=================  ====================================================================
``format_version`` 1
``family``         the family that made it (upstream OmniVoice's own files lack it)
``ref_text``       the transcript of the reference ("" when none was given)
``sample_rate``    the rate (Hz) of the audio the codec encoded
``frame_rate``     codec frames per second
tensors            the family's codes or latents, e.g. ``ref_audio_tokens`` ``(C, T)`` int64
                   (OmniVoice, Audio8) or ``reference_latents`` / ``prompt_latents``
                   ``(T, P, D)`` float32 (VoxCPM)
extras             other numbers a family keeps (OmniVoice's ``ref_rms``)
=================  ====================================================================

OmniVoice's prompt is upstream's ``VoiceClonePrompt`` file with these keys added (upstream reads
only its own keys), so its files load in upstream and upstream's load here.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import fs
from .errors import UsageError

FORMAT_VERSION = 1
_ENGINE_KEYS = ("format_version", "family", "ref_text", "sample_rate", "frame_rate")
MAKE_HINT = "make one with `audiocpp codec encode REF.wav --reference-text '...' --out voice.prompt`"


def save_prompt_dict(path: str | Path, data: dict[str, Any]) -> None:
    """``torch.save`` ``data`` to ``path`` atomically (a temporary file renamed over it)."""
    import torch

    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".prompt", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            torch.save(data, fh)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_prompt_dict(path: str | Path, *, family: str | None = None) -> dict[str, Any]:
    """The dict in a voice-prompt file; ``family``: refuse a prompt another family made."""
    from .errors import ModelError
    from .weights.torch_source import load_weights_only

    path = Path(path)
    if not fs.is_file(path):
        raise UsageError(f"voice prompt {str(path)!r} does not exist", hint="check the path")
    try:
        data = load_weights_only(path, mmap=False)  # bounded reads, every failure one error
    except ModelError as exc:
        raise UsageError(f"{str(path)!r} is not a voice prompt: cannot read it ({exc.message[:200]})",
                         hint=MAKE_HINT) from None
    version = data.get("format_version") if isinstance(data, dict) else None
    if not isinstance(version, int) or isinstance(version, bool) or version != FORMAT_VERSION:
        raise UsageError(f"{str(path)!r} is not a voice prompt: unsupported format version {_short(version)}",
                         hint=MAKE_HINT)
    made_by = data.get("family")
    if made_by is not None and not isinstance(made_by, str):
        raise UsageError(f"{str(path)!r} is not a voice prompt: its family is {_short(made_by)}",
                         hint=MAKE_HINT)
    if family is not None and made_by is not None and made_by != family:
        raise UsageError(f"the voice prompt {str(path)!r} was made by {made_by}, not {family}",
                         hint=f"encode the reference with a {family} model "
                         "(`audiocpp codec encode --model ...`)")
    return data


def _short(value: Any) -> str:
    text = repr(value) if isinstance(value, (str, int, float, type(None))) else type(value).__name__
    return text[:60]


def prompt_number(data: dict[str, Any], key: str, kind: type, path: str | Path) -> Any:
    """``data[key]`` as an int or a float (0 when absent), or a clear error."""
    value = data.get(key)
    if value is None:
        return kind(0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) > 1e9:
        raise UsageError(f"{str(path)!r} is not a voice prompt: {key} is {_short(value)}", hint=MAKE_HINT)
    return kind(value)


def prompt_family(path: str | Path) -> str | None:
    """The family recorded in a voice-prompt file (None for upstream OmniVoice files)."""
    family = read_prompt_dict(path).get("family")
    return family if isinstance(family, str) else None


@dataclass
class CodecPrompt:
    """A family's prepared voice in the engine's file layout: named code or latent tensors,
    the transcript and the rates. Families validate the tensors they expect on load."""

    family: str
    tensors: dict[str, Any]  # name -> torch.Tensor
    ref_text: str = ""
    sample_rate: int = 0
    frame_rate: float = 0.0
    extras: dict[str, Any] = field(default_factory=dict)

    def save(self, path: str | Path) -> None:
        data: dict[str, Any] = {"format_version": FORMAT_VERSION, "family": self.family,
                                "ref_text": self.ref_text, "sample_rate": int(self.sample_rate),
                                "frame_rate": float(self.frame_rate)}
        data.update({name: t.detach().cpu().contiguous() for name, t in self.tensors.items()})
        data.update(self.extras)
        save_prompt_dict(path, data)

    @classmethod
    def load(cls, path: str | Path, *, family: str) -> CodecPrompt:
        import torch

        data = read_prompt_dict(path, family=family)
        tensors = {k: v for k, v in data.items() if isinstance(v, torch.Tensor)}
        extras = {k: v for k, v in data.items() if k not in _ENGINE_KEYS and k not in tensors}
        text = data.get("ref_text", "")
        if not isinstance(text, str):
            raise UsageError(f"{str(path)!r} is not a voice prompt: ref_text must be a string",
                             hint=MAKE_HINT)
        return cls(family, tensors, text, prompt_number(data, "sample_rate", int, path),
                   prompt_number(data, "frame_rate", float, path), extras)

    def tensor(self, name: str, path: str | Path | None = None) -> Any:
        """The tensor ``name``, or a clear error naming the file."""
        if name not in self.tensors:
            where = f" {str(path)!r}" if path is not None else ""
            raise UsageError(f"the {self.family} voice prompt{where} has no {name!r}",
                             hint=f"re-encode the reference with this model: {MAKE_HINT}")
        return self.tensors[name]


def describe_prompt(prompt: Any) -> dict[str, Any]:
    """``key=value`` facts of a prompt for the CLI: family, transcript, rates and tensor shapes."""
    import torch

    facts: dict[str, Any] = {"family": getattr(prompt, "family", "?")}
    tensors = getattr(prompt, "tensors", None)
    if tensors is None:
        tensors = {k: v for k, v in vars(prompt).items() if isinstance(v, torch.Tensor)}
    for name, value in tensors.items():
        facts[name] = "x".join(str(d) for d in value.shape) + f" {str(value.dtype).removeprefix('torch.')}"
    for key in ("sample_rate", "frame_rate"):
        if getattr(prompt, key, None):
            facts[key] = getattr(prompt, key)
    facts["ref_text"] = repr(getattr(prompt, "ref_text", ""))
    return facts
