#!/usr/bin/env python3
"""One side of the OmniVoice benchmark (``tools/bench_omnivoice.py`` runs it twice): load a
checkpoint, synthesize the same request ``--repeats`` times after a warm-up, print one JSON
line with the wall times, peak RSS and a digest of the tokens; save tokens and audio.

``--impl upstream`` runs in the reference env (``omnivoice.OmniVoice.generate``);
``--impl ours`` in the project venv (``audiocpp.engine.load(...).session("tts").run``).
The request: ``duration`` seconds of audio, ``steps`` MaskGIT steps, guidance 2.0, the
default sampling (position temperature 5.0) seeded with ``seed``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import sys
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import torch  # noqa: E402


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def upstream(args):
    import logging

    logging.disable(logging.WARNING)
    from omnivoice import OmniVoice

    start = time.perf_counter()
    model = OmniVoice.from_pretrained(str(args.model), dtype=torch.float32).eval()
    load_s = time.perf_counter() - start
    captured = []
    original = model._generate_iterative

    def spy(task, config):
        out = original(task, config)
        captured[:] = [t.clone() for t in out]
        return out

    model._generate_iterative = spy

    def once():
        torch.manual_seed(args.seed)
        audio = model.generate(text=args.text, duration=args.duration, num_step=args.steps, guidance_scale=2.0)[0]
        return np.asarray(audio, dtype=np.float32), captured[0].numpy()

    return load_s, once


def ours(args):
    from audiocpp.engine import load
    from audiocpp.engine.records import TaskRequest

    start = time.perf_counter()
    model = load(args.model, family="omnivoice")
    session = model.session("tts", compute_dtype=args.compute_dtype)
    load_s = time.perf_counter() - start
    request = TaskRequest(text=args.text, seed=args.seed, options={
        "duration": args.duration, "num_inference_steps": args.steps, "guidance_scale": 2.0})

    def once():
        result = session.run(request)
        return result.audio.samples, result.details["tokens"][0]

    return load_s, once


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", choices=("ours", "upstream"), required=True)
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--compute-dtype", default="float32")
    ap.add_argument("--save", type=Path)
    args = ap.parse_args(argv)
    load_s, once = (upstream if args.impl == "upstream" else ours)(args)
    for _ in range(args.warmup):
        once()
    walls = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        audio, tokens = once()
        walls.append(time.perf_counter() - start)
    if args.save is not None:
        np.savez(args.save, audio=audio, tokens=tokens)
    print(json.dumps({
        "impl": args.impl, "compute_dtype": args.compute_dtype, "load_s": round(load_s, 2),
        "walls": [round(w, 3) for w in walls], "audio_s": round(audio.shape[0] / 24000, 3),
        "peak_rss_mb": round(peak_rss_mb(), 1), "threads": torch.get_num_threads(),
        "tokens_sha": hashlib.sha256(np.ascontiguousarray(tokens).tobytes()).hexdigest()[:16],
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
