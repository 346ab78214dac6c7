"""Parity cases: the goldens' manifest cases turned into our requests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from audiocpp.engine.records import TaskRequest, VoiceReference

GENERATE_KINDS = ("generate", "long_form")


def request_for(case: dict[str, Any], defaults: dict[str, Any], audio_dir: Path) -> tuple[str, TaskRequest]:
    """(task, request) reproducing a manifest case with our session."""
    o = {**defaults, **case}
    options: dict[str, Any] = {"do_sample": o["do_sample"], "temperature": o["temperature"],
                               "top_p": o["top_p"], "top_k": o["top_k"],
                               "max_new_tokens": o["max_new_tokens"],
                               "text_chunk_size": o.get("text_chunk_size", 0)}
    refs = case.get("references", [])
    voice = None
    if len(refs) == 1:
        voice = VoiceReference(path=audio_dir / refs[0]["audio"])
        options["reference_text"] = refs[0]["text"]
    elif refs:
        options["multi_reference_cond"] = json.dumps([{"audio": str(audio_dir / r["audio"]),
                                                       "text": r["text"]}
                                                      for r in refs])
    return ("clone" if refs else "tts"), TaskRequest(text=case["text"], seed=o["seed"], voice=voice,
                                                     options=options)


def generate_cases(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in manifest["cases"] if c["kind"] in GENERATE_KINDS]


def cosine(a, b) -> float:
    import numpy as np

    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
