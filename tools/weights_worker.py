#!/usr/bin/env python3
"""One weight type of ``tools/bench.py <family> --weights ...`` (tools/weights_bench.py runs it), in
its own process: read the package once (timed), load it with the default options (timed, to the
first session), run one fixed request ``--repeats`` times after a warm-up, print one JSON line.

    python tools/weights_worker.py omnivoice|voxcpm2|audio8_tts PACKAGE --save OUT.npz [--repeats 2]
           [--threads 1] [--device auto] [--duration 5 --steps 16] [--patches 4] [--frames 16]

RSS figures come from /proc/self/status: the baseline (after importing torch and audiocpp), the
peak while loading (VmHWM), the peak while generating (VmHWM reset after the warm-up). Resident
weights are summed over the networks' parameters and buffers by kind (f32, bf16, f16, q8_0 / q4_0
blocks, int8, int4), those still viewing the memory-mapped file counted apart (``mmap``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script
    sys.path.append(str(REPO))
from tools import bench_requests  # noqa: E402
from tools.bench_common import proc_number, reset_peak, status_bytes, timed_runs  # noqa: E402

TEXTS = {
    "omnivoice": "The old lighthouse keeper climbed the stairs slowly, counting each step he took.",
    "voxcpm2": "The quick brown fox jumps over the lazy dog.",
    "audio8_tts": "The quick brown fox jumps over the lazy dog.",
}
SEEDS = {"omnivoice": 0}  # 7 elsewhere


def io_read_bytes() -> int:
    """Bytes this process read with read() calls (``rchar``; page faults of a memory map do not count)."""
    return proc_number("/proc/self/io", "rchar")


def read_once(path: Path) -> float:
    """Seconds to read the file once, sequentially, into one reused buffer."""
    buf = bytearray(16 << 20)
    view = memoryview(buf)
    start = time.perf_counter()
    with open(path, "rb", buffering=0) as fh:
        while fh.readinto(view):
            pass
    return time.perf_counter() - start


def request(family: str, args):
    from audiocpp.engine.records import TaskRequest

    options = bench_requests.sized_options(family, args)
    return TaskRequest(text=TEXTS[family], seed=SEEDS.get(family, 7), options=options)


def networks(family: str, model, session) -> list:
    """The torch modules a session computes with (the generator in its dtype and the codec)."""
    if family == "omnivoice":
        return [session.decoder.lm, bench_requests.codec_of(family, model)]
    if family == "voxcpm2":
        return [session.generator.model, bench_requests.codec_of(family, model)]
    return [session.network, bench_requests.codec_of(family, model)]


def resident(modules: list) -> dict[str, int]:
    """Bytes of the modules' tensors by kind; views of a memory-mapped GGUF counted as ``mmap ...``."""
    import torch

    from audiocpp.engine.nn.linear.q8_0_linear import Q8_0Linear
    from audiocpp.engine.nn.linear.quantized import Int4Linear, Int8Linear
    from audiocpp.engine.weights.gguf_file import mapped_file

    kinds = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16", torch.int8: "int8"}
    layer_kinds = {Int4Linear: "int4", Int8Linear: "int8"}
    out: dict[str, int] = {}
    seen: set[int] = set()
    for module in modules:  # a quantized layer's values and scales count as its kind
        for child in module.modules():
            kind = (f"q{child.bits}_0 blocks" if isinstance(child, Q8_0Linear)
                    else layer_kinds.get(type(child)))
            for t in child.buffers(recurse=False) if kind else ():
                if t.data_ptr() not in seen:
                    seen.add(t.data_ptr())
                    out[kind] = out.get(kind, 0) + t.untyped_storage().nbytes()
    for module in modules:
        tensors = list(module.parameters()) + list(module.buffers())
        for child in module.modules():  # packed / bf16-weight linears hold their weights as attributes
            for value in vars(child).values():
                if isinstance(value, torch.Tensor) and not any(value is t for t in tensors):
                    tensors.append(value)
        for t in tensors:
            if t.device.type == "meta":
                continue
            try:
                key, size = t.data_ptr(), t.untyped_storage().nbytes()
                strided = True
            except RuntimeError:  # opaque oneDNN-packed tensors
                key, size, strided = id(t), t.numel() * t.element_size(), False
            if key in seen:
                continue
            seen.add(key)
            kind = kinds.get(t.dtype, str(t.dtype).removeprefix("torch."))
            if strided and mapped_file(t) is not None:
                kind = f"mmap {kind}"
            out[kind] = out.get(kind, 0) + size
    return out


def first_step(family: str, model, session, args):
    """The logits of the first decoding step (before any sampled token feeds back), for the drift
    figures: Audio8's semantic logits after the prompt, OmniVoice's step-0 target logits (cond and
    uncond); None for VoxCPM2 (its first latent patch is the first step)."""
    import torch

    text = TEXTS[family]
    with torch.inference_mode():
        if family == "audio8_tts":
            from audiocpp.families.audio8_tts.generate import prefill_tensors
            from audiocpp.families.audio8_tts.prompt_layout import PromptLayoutBuilder

            net, device = session.network, model.parts.device
            prompt, mask = prefill_tensors(
                [PromptLayoutBuilder(model.parts.tokenizer, model.config).build(text)], model.config)
            prompt, mask = prompt.to(device), mask.to(device)
            net.setup(1, prompt.shape[-1] + 1)
            hidden = net.slow.prefill(net.slow.embed(prompt), mask.cumsum(-1) - 1, mask)
            return net.slow.semantic_logits(hidden.logits_input)[0].float().cpu().numpy()
        if family == "omnivoice":
            from audiocpp.families.omnivoice.generate import build_batch
            from audiocpp.families.omnivoice.prompt_layout import build_prompt_layout

            cfg = model.cfg
            prompt = build_prompt_layout(model.tokenizer, text, int(args.duration * model.codec.frame_rate),
                                  num_codebooks=cfg.num_audio_codebook, mask_id=cfg.audio_mask_id)
            decoder = session.decoder
            c, u = decoder.step_logits(decoder.pack(build_batch(prompt, cfg.audio_mask_id), guided=True))
            return torch.cat([c, u]).float().numpy()
    return None


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("family", choices=sorted(TEXTS))
    ap.add_argument("path", type=Path)
    ap.add_argument("--save", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default=None)
    bench_requests.add_request_size(ap, patches=4, frames=16)
    args = ap.parse_args(argv)
    import numpy as np
    import torch

    import audiocpp.engine.registry  # noqa: F401 - part of the baseline
    from audiocpp.engine import load
    from audiocpp.engine.registry import get_family

    get_family(args.family)
    if args.threads:
        torch.set_num_threads(args.threads)
    baseline = status_bytes("VmRSS")
    read_s = read_once(args.path)
    rchar = io_read_bytes()
    start = time.perf_counter()
    options = {"device": args.device} if args.device else None
    model = load(args.path, family=args.family, load_options=options)
    session = model.session("tts")
    load_s = time.perf_counter() - start
    rss_loaded = status_bytes("VmRSS")
    read_by_calls = io_read_bytes() - rchar
    peak_load = status_bytes("VmHWM")
    weights = resident(networks(args.family, model, session))
    req = request(args.family, args)
    session.run(req)  # warm-up: first touch of every weight page, allocator
    reset = reset_peak()
    walls, result = timed_runs(lambda: session.run(req), args.repeats)
    key = "latents" if args.family == "voxcpm2" else "tokens"  # Audio8's codes saved as tokens
    value = np.asarray(bench_requests.output_of(args.family, result))
    first = first_step(args.family, model, session, args)
    extra = {} if first is None else {"first_logits": first}
    if args.family == "audio8_tts":  # greedy codes: sampled ones of random weights diverge at the first draw
        greedy = session.run(dataclasses.replace(req, options={**req.options, "do_sample": False}))
        extra["greedy"] = np.asarray(greedy.details["codes"][0])
    np.savez(args.save, audio=result.audio.samples, **{key: value}, **extra)
    print(json.dumps({
        **bench_requests.worker_fields(args.family, args.path, session), "device": str(model.parts.device),
        "file_bytes": args.path.stat().st_size, "read_once_s": read_s,
        "load_s": load_s, "load_read_calls_bytes": read_by_calls,
        "baseline_rss": baseline, "rss_loaded": rss_loaded, "peak_rss_load": peak_load,
        "peak_rss_gen": status_bytes("VmHWM") if reset else None,
        "rss_end": status_bytes("VmRSS"), "resident": weights, "walls": walls,
        "audio_s": result.audio.duration,
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
