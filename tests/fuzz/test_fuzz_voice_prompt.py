"""Fuzz voice-prompt files (``--voice-prompt``, the server's stored voices): mutated real prompt
files, and well-formed ``torch.save`` dicts whose entries are anything (tensors of any dtype and
shape, strings, NaN, nested containers, the wrong family). Read by the engine
(``read_prompt_dict``, ``CodecPrompt.load``) and by each family's loader with a real tiny model
(OmniVoice, Audio8, VoxCPM2), which must refuse with one UsageError what they cannot use.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from audiocpp.engine.voice_prompt import CodecPrompt, read_prompt_dict

from .harness import check, fuzz_settings
from .mutate import mutated

DTYPES = [torch.int64, torch.int32, torch.float32, torch.float16, torch.bool, torch.complex64, torch.uint8,
          torch.bfloat16]
NAMES = ["ref_audio_tokens", "reference_latents", "prompt_latents"]


@st.composite
def tensors(draw: st.DrawFn, like: tuple[int, ...] | None = None) -> torch.Tensor:
    dtype = draw(st.sampled_from(DTYPES))
    if like is not None and draw(st.booleans()):
        shape = list(like)
        if shape and draw(st.booleans()):
            shape[draw(st.integers(0, len(shape) - 1))] = draw(st.integers(0, 9))
    else:
        shape = draw(st.lists(st.integers(0, 9), max_size=4))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    values = (torch.randint(-3, 2000, shape, generator=g) if shape
              else torch.tensor(draw(st.integers(-5, 5000))))
    if draw(st.integers(0, 5)) == 0 and values.numel():
        values.view(-1)[0] = draw(st.sampled_from([-(2**40), 2**40, -1, 2**31]))
    return values.to(dtype)


VALUES = st.one_of(st.none(), st.booleans(), st.integers(-(2**64), 2**64), st.floats(), st.text(max_size=20),
                   st.lists(st.integers(), max_size=3),
                   st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@st.composite
def prompt_dicts(draw: st.DrawFn, family: str, shapes: dict[str, tuple[int, ...]]) -> bytes:
    data: dict[str, Any] = {"format_version": 1, "family": family, "ref_text": "hello", "sample_rate": 24000,
                            "frame_rate": 25.0, "ref_rms": 0.1}
    for name, shape in shapes.items():
        data[name] = torch.ones(shape, dtype=torch.float32 if "latents" in name else torch.long)
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):  # one of the tensors the family reads: another dtype or shape
            key = draw(st.sampled_from(sorted(shapes)))
            data[key] = draw(tensors(shapes[key]))
            continue
        key = draw(st.sampled_from([*data, *NAMES, "extra"]))
        kind = draw(st.integers(0, 3))
        if kind == 0 and key in NAMES:
            data[key] = draw(tensors(shapes.get(key)))
        elif kind == 1:
            data[key] = draw(st.one_of(VALUES, tensors()))
        elif kind == 2:
            data.pop(key, None)
        else:
            data[key] = draw(st.sampled_from([1, 2, "1", 1.0, True, None, "omnivoice", "voxcpm2",
                                              "audio8_tts"]))
    buf = io.BytesIO()
    torch.save(data, buf)
    return buf.getvalue()


# -- the families' loaders with real tiny models ---------------------------------------------------
@pytest.fixture(scope="module")
def models(tiny_models: dict[str, Any]) -> dict[str, Any]:
    return tiny_models


def _shapes(model: Any) -> dict[str, tuple[int, ...]]:
    if model.family == "voxcpm2":
        shape = (3, model.config.patch_size, model.config.audio_vae.latent_dim)
        return {"reference_latents": shape, "prompt_latents": shape}
    if model.family == "audio8_tts":
        return {"ref_audio_tokens": (model.parts.codec.cfg.num_codebooks, 5)}
    return {"ref_audio_tokens": (model.cfg.num_audio_codebook, 5)}


def load_everywhere(path: Path, models: dict[str, Any]) -> None:
    read_prompt_dict(path)
    for family, model in models.items():
        check("voice_prompt", lambda family=family: CodecPrompt.load(path, family=family), files=[path])
        prompt = check("voice_prompt", lambda model=model: model.load_voice_prompt(path), files=[path])
        if not isinstance(prompt, Exception):
            tensors = getattr(prompt, "tensors", None) or {"ref_audio_tokens": prompt.ref_audio_tokens}
            used = [t for name, t in tensors.items() if name in _shapes(model)]
            assert used and all(t.numel() > 0 for t in used), "an empty prompt was accepted"


def valid_prompt(family: str, shapes: dict[str, tuple[int, ...]]) -> bytes:
    data: dict[str, Any] = {"format_version": 1, "family": family, "ref_text": "hello", "sample_rate": 24000,
                            "frame_rate": 25.0, "ref_rms": 0.1}
    for name, shape in shapes.items():
        data[name] = torch.ones(shape, dtype=torch.float32 if "latents" in name else torch.long)
    buf = io.BytesIO()
    torch.save(data, buf)
    return buf.getvalue()


@given(st.data())
@fuzz_settings("voice_prompt")
def test_prompt_files(fuzz_dir: Path, models: dict[str, Any], data: st.DataObject) -> None:
    family = data.draw(st.sampled_from(sorted(models)))
    shapes = _shapes(models[family])
    if data.draw(st.integers(0, 2)) == 0:  # a real file of the family, mutated byte by byte
        raw = data.draw(mutated({family: valid_prompt(family, shapes)}, max_edits=3, focus=1024))[1]
    else:
        raw = data.draw(prompt_dicts(family, shapes))
    path = fuzz_dir / "voice.prompt"
    path.write_bytes(raw)
    check("voice_prompt", lambda: load_everywhere(path, models), files=[path])
