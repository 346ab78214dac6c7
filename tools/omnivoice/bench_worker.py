#!/usr/bin/env python3
"""One side of the OmniVoice benchmark (``tools/omnivoice/bench.py`` runs it): load a
checkpoint, synthesize the same request ``--repeats`` times after a warm-up, print one JSON
line with the wall times, peak RSS and a digest of the tokens; save tokens and audio.

``--impl upstream`` runs in the reference env (``omnivoice.OmniVoice.generate``);
``--impl ours`` in the project venv (``audiocpp.engine.load(...).session("tts").run``).
With ``--serve`` it loads once and times one run per ``run`` line on stdin, so the benchmark
can interleave implementations (a shared machine's load then hits all of them alike).
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

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script, in the project venv or the reference env
    sys.path.append(str(REPO))
from tools.bench_common import timed_runs  # noqa: E402


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
        audio = model.generate(text=args.text, duration=args.duration, num_step=args.steps,
                               guidance_scale=2.0)[0]
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


def drift(args) -> dict:
    """Step-0 drift of ``--compute-dtype`` against float32 on the benchmark prompt: logits
    (max |diff| and relative RMS) and the greedy predictions (share of the 8 x T equal)."""
    from audiocpp.engine import load
    from audiocpp.families.omnivoice.generate import MaskGitParams, build_batch
    from audiocpp.families.omnivoice.prompt_layout import build_prompt_layout

    model = load(args.model, family="omnivoice")
    cfg = model.cfg
    target = int(args.duration * model.codec.frame_rate)
    prompt = build_prompt_layout(model.tokenizer, args.text, target, num_codebooks=cfg.num_audio_codebook,
                          mask_id=cfg.audio_mask_id)
    batch = build_batch(prompt, cfg.audio_mask_id)
    out = {}
    for dtype in ("float32", args.compute_dtype):
        decoder = model.session("tts", compute_dtype=dtype).decoder
        with torch.inference_mode():
            c, u = decoder.step_logits(decoder.pack(batch, guided=True))
            pred = decoder.predict(c.clone(), u, MaskGitParams(), None)[0]
        out[dtype] = (torch.cat([c, u]), pred)
    (a, pa), (b, pb) = out["float32"], out[args.compute_dtype]
    return {"dtype": args.compute_dtype, "logits_max_abs_diff": round(float((a - b).abs().max()), 5),
            "logits_rel_rms": float(((a - b).pow(2).mean() / a.pow(2).mean()).sqrt()),
            "step0_greedy_equal": round(float((pa == pb).float().mean()), 5), "tokens": pa.numel()}


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
    ap.add_argument("--drift", action="store_true", help="print the step-0 drift of --compute-dtype and exit")
    ap.add_argument("--serve", action="store_true", help="time runs on request (see serve())")
    args = ap.parse_args(argv)
    if args.drift:
        print(json.dumps(drift(args)))
        return 0
    load_s, once = (upstream if args.impl == "upstream" else ours)(args)
    if args.serve:
        return serve(args, load_s, once)
    for _ in range(args.warmup):
        once()
    walls, (audio, tokens) = timed_runs(once, args.repeats)
    if args.save is not None:
        np.savez(args.save, audio=audio, tokens=tokens)
    print(json.dumps({**summary(args, load_s, audio, tokens), "walls": [round(w, 3) for w in walls]}))
    return 0


def summary(args, load_s: float, audio: np.ndarray, tokens: np.ndarray) -> dict:
    return {
        "impl": args.impl, "compute_dtype": args.compute_dtype, "load_s": round(load_s, 2),
        "audio_s": round(audio.shape[0] / 24000, 3), "peak_rss_mb": round(peak_rss_mb(), 1),
        "threads": torch.get_num_threads(),
        "tokens_sha": hashlib.sha256(np.ascontiguousarray(tokens).tobytes()).hexdigest()[:16],
    }


def serve(args, load_s: float, once) -> int:
    """Line protocol for interleaved timing: ``run`` -> one timed run, prints {"wall": s};
    ``quit`` -> saves the last output, prints the summary and exits."""
    print(json.dumps({"ready": True, "load_s": round(load_s, 2)}), flush=True)
    audio = tokens = None
    for line in sys.stdin:
        command = line.strip()
        if command == "run":
            start = time.perf_counter()
            audio, tokens = once()
            print(json.dumps({"wall": round(time.perf_counter() - start, 3)}), flush=True)
        elif command == "quit":
            break
    if audio is None:
        return 1
    if args.save is not None:
        np.savez(args.save, audio=audio, tokens=tokens)
    print(json.dumps(summary(args, load_s, audio, tokens)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
