"""One side of the VoxCPM benchmarks, in its own process (tools/voxcpm2/bench.py and
tools/voxcpm1/bench.py run it).

    python bench_worker.py ours|upstream CKPT --dtype float32 --patches 6 --repeats 3 --text "..."
           [--family voxcpm1]

``ours`` runs in the project venv (audiocpp), ``upstream`` in .ref-envs/voxcpm (voxcpm 2.0.3;
its compute dtype is the checkpoint config's ``dtype``, so the orchestrator hands it a config
copy per dtype). Both generate exactly ``--patches`` patches (min_len = max_len) of the same
text with the same seed: one warm-up run, then ``--repeats`` timed offline runs and
``--repeats`` timed streaming runs (time to first audio). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script, in the project venv or a reference env
    sys.path.append(str(REPO))
from tools.bench_common import reset_peak, status_bytes  # noqa: E402


class Ours:
    def __init__(self, ckpt: Path, dtype: str, family: str = "voxcpm2") -> None:
        from audiocpp.engine.records import TaskRequest
        from audiocpp.engine.registry import get_family

        self.TaskRequest = TaskRequest
        model = get_family(family).load(ckpt)
        self.offline = model.session("tts", "offline", compute_dtype=dtype)
        self.streaming = model.session("tts", "streaming", compute_dtype=dtype)
        self.sample_rate = model.sample_rate

    def _request(self, text: str, patches: int, seed: int):
        return self.TaskRequest(text=text, seed=seed, options={
            "min_tokens": patches, "max_tokens": patches, "retry_badcase": False,
            "num_inference_steps": 10, "guidance_scale": 2.0})

    def run(self, text: str, patches: int, seed: int) -> tuple[float, int]:
        result = self.offline.run(self._request(text, patches, seed))
        return result.audio.duration, result.details["num_patches"][0]

    def first_audio(self, text: str, patches: int, seed: int) -> float:
        t0 = time.perf_counter()
        first = None
        for event in self.streaming.stream(self._request(text, patches, seed)):
            if first is None and not event.is_final:
                first = time.perf_counter() - t0
        return first if first is not None else float("nan")


class Upstream:
    def __init__(self, ckpt: Path, dtype: str) -> None:
        import torch
        from voxcpm import VoxCPM

        self.torch = torch
        self.tts = VoxCPM.from_pretrained(str(ckpt), load_denoiser=False, optimize=False, device="cpu")
        self.sample_rate = self.tts.tts_model.sample_rate
        got = self.tts.tts_model.config.dtype
        if got != dtype:
            raise SystemExit(f"upstream runs in {got}, the benchmark asked for {dtype}")

    def _kwargs(self, text: str, patches: int) -> dict:
        return dict(text=text, cfg_value=2.0, inference_timesteps=10, min_len=patches, max_len=patches,
                    normalize=False, denoise=False, retry_badcase=False)

    def run(self, text: str, patches: int, seed: int) -> tuple[float, int]:
        self.torch.manual_seed(seed)
        wav = self.tts.generate(**self._kwargs(text, patches))
        return len(wav) / self.sample_rate, patches

    def first_audio(self, text: str, patches: int, seed: int) -> float:
        self.torch.manual_seed(seed)
        t0 = time.perf_counter()
        first = None
        for _chunk in self.tts.generate_streaming(**self._kwargs(text, patches)):
            if first is None:
                first = time.perf_counter() - t0
        return first if first is not None else float("nan")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("side", choices=["ours", "upstream"])
    parser.add_argument("ckpt", type=Path)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--patches", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--text", default="The quick brown fox jumps over the lazy dog.")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--family", default="voxcpm2", help="our family plugin (voxcpm2 or voxcpm1)")
    args = parser.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    side = (Ours(args.ckpt, args.dtype, args.family) if args.side == "ours"
            else Upstream(args.ckpt, args.dtype))
    load_s = time.perf_counter() - t0
    rss_load_mb = status_bytes("VmHWM") / 2**20
    side.run(args.text, 2, args.seed)  # warm-up (first-touch of every weight page, allocator)
    reset = reset_peak()
    walls, audio_s, patches = [], 0.0, 0
    for _ in range(args.repeats):
        t = time.perf_counter()
        audio_s, patches = side.run(args.text, args.patches, args.seed)
        walls.append(time.perf_counter() - t)
    ttfa = [side.first_audio(args.text, args.patches, args.seed) for _ in range(args.repeats)]
    print(json.dumps({
        "side": args.side, "dtype": args.dtype, "threads": torch.get_num_threads(), "load_s": load_s,
        "walls": walls, "audio_s": audio_s, "patches": patches, "ttfa": ttfa,
        "peak_rss_load_mb": rss_load_mb, "peak_rss_gen_mb": status_bytes("VmHWM") / 2**20 if reset else None,
        "rss_now_mb": status_bytes("VmRSS") / 2**20,
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
