"""Run audio jobs with the upstream code (torchaudio, pydub 0.25.1, OmniVoice's utils/audio.py).

Usage: python audio_jobs.py JOBS.json INPUTS.npz OUTPUTS.npz
Each job is {"id", "fn", "inputs": [array names], "args": [...], "kwargs": {...}}. Array
results go to OUTPUTS.npz under the job id (lists of arrays as "<id>/<i>"); JSON-able results
(ranges, milliseconds) are printed, as one JSON object on the last line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pydub
import pydub.silence as pyd
import torch
import torchaudio
import torchaudio.functional as F
from upstream_modules import load

ov = load("audio")


def _seg(x: np.ndarray, sr: int) -> pydub.AudioSegment:
    return ov.numpy_to_audiosegment(x, sr)


def run_job(job: dict[str, Any], arrays: dict[str, np.ndarray]) -> Any:
    fn = job["fn"]
    xs = [arrays[name] for name in job.get("inputs", [])]
    args = job.get("args", [])
    kw = job.get("kwargs", {})
    if fn == "resample":
        return F.resample(torch.from_numpy(xs[0]), *args).numpy()
    if fn == "load_audio":
        return ov.load_audio(*args)
    if fn == "segment_roundtrip":
        return ov.audiosegment_to_numpy(_seg(xs[0], args[0]))
    if fn == "segment_len":
        return len(_seg(xs[0], args[0]))
    if fn == "slice":
        sr, start, end = args
        return ov.audiosegment_to_numpy(_seg(xs[0], sr)[start:end])
    if fn == "dbfs_chunks":
        seg = _seg(xs[0], args[0])
        return [[c.rms, c.dBFS] for c in (seg[i:i + args[1]] for i in range(0, len(seg), args[1]))]
    if fn == "rms_windows":
        seg = _seg(xs[0], args[0])
        return [seg[start:end].rms for start, end in zip(args[1], args[2])]
    if fn in ("detect_silence", "detect_nonsilent", "detect_leading_silence"):
        return getattr(pyd, fn)(_seg(xs[0], args[0]), **kw)
    if fn == "detect_trailing_silence":
        return pyd.detect_leading_silence(_seg(xs[0], args[0]).reverse(), **kw)
    if fn == "split_on_silence":
        return [ov.audiosegment_to_numpy(s) for s in pyd.split_on_silence(_seg(xs[0], args[0]), **kw)]
    if fn == "remove_silence_edges":
        return ov.audiosegment_to_numpy(ov.remove_silence_edges(_seg(xs[0], args[0]), **kw))
    if fn == "remove_silence":
        return ov.remove_silence(xs[0], *args, **kw)
    if fn == "trim_long_audio":
        return ov.trim_long_audio(xs[0], *args, **kw)
    if fn == "fade_and_pad":
        return ov.fade_and_pad_audio(xs[0], **kw)
    if fn == "cross_fade_chunks":
        return ov.cross_fade_chunks([x.copy() for x in xs], *args, **kw)
    raise SystemExit(f"unknown job fn {fn!r}")


def main() -> None:
    jobs = json.loads(Path(sys.argv[1]).read_text())
    arrays = dict(np.load(sys.argv[2]))
    out_arrays: dict[str, np.ndarray] = {}
    results: dict[str, Any] = {}
    for job in jobs:
        value = run_job(job, arrays)
        if isinstance(value, np.ndarray):
            out_arrays[job["id"]] = value
            results[job["id"]] = {"array": list(value.shape), "dtype": str(value.dtype)}
        elif isinstance(value, list) and value and isinstance(value[0], np.ndarray):
            for i, item in enumerate(value):
                out_arrays[f"{job['id']}/{i}"] = item
            results[job["id"]] = {"arrays": len(value)}
        else:
            results[job["id"]] = value
    np.savez(sys.argv[3], **out_arrays)
    versions = {"torch": torch.__version__, "torchaudio": torchaudio.__version__,
                "pydub": getattr(pydub, "__version__", "0.25.1")}
    print(json.dumps({"results": results, "versions": versions}))


if __name__ == "__main__":
    main()
