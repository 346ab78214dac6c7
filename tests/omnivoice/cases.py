"""The parity cases: one request each, run by upstream (tools/omnivoice/reference.py)
and by us. ``config`` holds upstream's generation-config fields; ``ours`` maps them to our
spec option names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

#: upstream generation-config field -> our request option
OPTION_NAMES = {"num_step": "num_inference_steps"}

LONG_TEXT = (
    "Once upon a time, in a small village by the sea, there lived an old fisherman and his wife. "
    "Every morning he went out in his little boat, and every evening he came back with a few fish. "
    "One day he caught a golden fish that could speak. The fish begged him to let it go, and the kind "
    "old man did so without asking for anything in return. When he told his wife, she scolded him and "
    "sent him back to the shore to ask the fish for a new trough, then for a house, then for a palace. "
    "Each time the sea grew darker and wilder, and each time the fish granted the wish. At last she "
    "wanted to rule the sea itself, and the fish took everything back."
)
MEDIUM_TEXT = ("The first sentence is here. Then a second one follows it! Is this the third? "
               "Yes, and a fourth, slightly longer sentence closes the paragraph.")

GREEDY = {"num_step": 8, "position_temperature": 0.0, "class_temperature": 0.0}


def reference_tone(sample_rate: int = 24000, seconds: float = 2.0, seed: int = 7) -> np.ndarray:
    """A synthetic 'voice': harmonic tone with AM and noise between near-silent edges, quiet
    enough (RMS < 0.1) that upstream's reference gain and output rescale both apply."""
    rng = np.random.default_rng(seed)
    n = int(seconds * sample_rate)
    t = np.arange(n) / sample_rate
    f0 = 140.0 + 20.0 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / sample_rate
    tone = sum(np.sin(k * phase) / k for k in range(1, 6))
    envelope = 0.5 * (1 + np.sin(2 * np.pi * 3.0 * t))
    audio = 0.05 * tone * envelope + 0.003 * rng.standard_normal(n)
    edge = int(0.35 * sample_rate)
    audio[:edge] *= 0.002
    audio[-edge:] *= 0.002
    return audio.astype(np.float32)


def write_references(folder: Path) -> dict[str, Path]:
    """The reference WAVs (float32, so both sides read identical samples)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, rate, seconds in (("ref24k", 24000, 2.0), ("ref16k", 16000, 2.4)):
        path = folder / f"{name}.wav"
        sf.write(path, reference_tone(rate, seconds), rate, subtype="FLOAT")
        out[name] = path
    return out


def cases(refs: dict[str, Path], prompt_file: Path) -> list[dict[str, Any]]:
    ref24, ref16 = str(refs["ref24k"]), str(refs["ref16k"])
    design = {"text": "Hello world.", "language": "English", "instruct": "female, low pitch, british accent"}
    clone = {"text": "This is a test.", "language": "en", "ref_audio": ref24, "ref_text": "Hello world"}
    return [
        {"name": "auto_greedy", "text": "Nice to meet you.", "config": GREEDY},
        {"name": "auto_sampled", "text": "Nice to meet you.", "seed": 11,
         "config": {"num_step": 8, "position_temperature": 5.0}},
        {"name": "auto_classtemp", "text": "Nice to meet you.", "seed": 12,
         "config": {"num_step": 8, "position_temperature": 5.0, "class_temperature": 0.8}},
        {"name": "auto_defaults", "text": "Nice to meet you [laughter] again.", "seed": 13, "config": {}},
        {"name": "design", **design, "config": GREEDY},
        {"name": "design_zh", "text": "你好，世界。[laughter] 今天天气很好。", "language": "zh",
         "instruct": "male, elderly", "config": GREEDY},
        {"name": "design_dur", **design, "duration": 1.0, "config": GREEDY},
        {"name": "tts_speed", "text": MEDIUM_TEXT, "speed": 1.5, "config": {**GREEDY, "guidance_scale": 0.0}},
        {"name": "clone", **clone, "voice_prompt_out": str(prompt_file), "config": GREEDY},
        {"name": "clone_raw", **clone,
         "config": {**GREEDY, "preprocess_prompt": False, "postprocess_output": False, "denoise": False}},
        {"name": "clone_sampled", **clone, "ref_audio": ref16, "seed": 14, "config": {"num_step": 8}},
        {"name": "clone_prompt", "text": "This is a test.", "language": "en",
         "voice_prompt_in": str(prompt_file), "config": GREEDY},
        {"name": "long_auto", "text": LONG_TEXT, "seed": 15, "config": {"num_step": 4}},
        {"name": "long_clone", "text": MEDIUM_TEXT, "ref_audio": ref24, "ref_text": "Hello world.",
         "config": {**GREEDY, "audio_chunk_threshold": 3.0, "audio_chunk_duration": 2.0}},
    ]


def batch_cases(refs: dict[str, Path]) -> list[dict[str, Any]]:
    """Upstream's own batches (one ``generate`` call with lists; greedy, so no random stream is
    shared), items of different tasks and target lengths. Upstream batches cloning and non-cloning
    items apart (its ``infer_batch`` does too): every item of a batch has a reference, or none has."""
    voiced = [
        {"text": "Nice to meet you."},
        {"text": "Hello world.", "language": "English", "instruct": "female, low pitch, british accent"},
        {"text": MEDIUM_TEXT},
        {"text": "Hello world.", "language": "English", "instruct": "male, elderly", "duration": 1.0},
    ]
    clones = [
        {"text": "This is a test.", "language": "en", "ref_audio": str(refs["ref24k"]),
         "ref_text": "Hello world"},
        {"text": "A second, longer sentence to say.", "ref_audio": str(refs["ref16k"]),
         "ref_text": "Hello there"},
    ]
    return [{"name": "batch_greedy", "batch": voiced, "config": GREEDY},
            {"name": "batch_clone", "batch": clones, "config": GREEDY}]


def our_options(case: dict[str, Any]) -> dict[str, Any]:
    """Our request options for a case (spec names)."""
    options = {OPTION_NAMES.get(k, k): v for k, v in case.get("config", {}).items()}
    for key in ("duration", "speed", "language", "instruct"):
        if case.get(key) is not None:
            options[key] = case[key]
    if case.get("ref_text") is not None:
        options["reference_text"] = case["ref_text"]
    options["seed"] = int(case.get("seed", 0))
    return options


def write_cases(path: Path, items: list[dict[str, Any]]) -> None:
    path.write_text(json.dumps(items, ensure_ascii=False, indent=1))
