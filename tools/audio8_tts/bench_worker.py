"""One side of the Audio8 TTS benchmark, in its own process (tools/audio8_tts/bench.py runs it).

    python bench_worker.py ours|upstream CKPT --dtype float32 --frames 16 --repeats 2 --text "..."

``ours`` runs in the project venv, ``upstream`` in .ref-envs/audio8 (the 14468db code from
``--upstream``, float32 on CPU as upstream requires). Both generate ``--frames`` frames of the same
text with the same seed (random weights do not stop early with these settings; the frame count is
checked), decode them, and print one JSON line: load time, offline walls, time to first audio
(ours: streaming; upstream has no streaming, its first audio is the end of an offline run), peak
RSS while generating, and a hash of the codes (both sides' codes should be identical).
"""

from __future__ import annotations

import argparse
import hashlib
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


def _hash(codes) -> str:
    import numpy as np

    return hashlib.sha256(np.ascontiguousarray(np.asarray(codes, dtype=np.int64)).tobytes()).hexdigest()[:16]


class Ours:
    def __init__(self, ckpt: Path, dtype: str) -> None:
        from audiocpp.engine.records import TaskRequest
        from audiocpp.families.audio8_tts import plugin

        self.TaskRequest = TaskRequest
        model = plugin.load(ckpt)
        self.offline = model.session("tts", "offline", compute_dtype=dtype)
        self.streaming = model.session("tts", "streaming", compute_dtype=dtype)

    def _request(self, text: str, frames: int, seed: int):
        return self.TaskRequest(text=text, seed=seed,
                                options={"max_new_tokens": frames, "streaming_chunk_frames": 1})

    def run(self, text: str, frames: int, seed: int) -> tuple[float, int, str]:
        result = self.offline.run(self._request(text, frames, seed))
        codes = result.details["codes"][0]
        return result.audio.duration, int(codes.shape[1]), _hash(codes)

    def first_audio(self, text: str, frames: int, seed: int) -> float:
        t0 = time.perf_counter()
        first = None
        for event in self.streaming.stream(self._request(text, frames, seed)):
            if first is None and not event.is_final:
                first = time.perf_counter() - t0
        return first if first is not None else float("nan")


class Upstream:
    def __init__(self, ckpt: Path, dtype: str, upstream: Path) -> None:
        import torch

        if dtype != "float32":
            raise SystemExit("upstream runs in float32 on CPU only")
        if str(REPO) not in sys.path:
            sys.path.insert(0, str(REPO))
        from tools.audio8_tts.checkpoint import load_upstream, upstream_modules

        self.torch = torch
        up = upstream_modules(upstream)
        self.model = load_upstream(ckpt, up)
        self.processor = up.processing.ArkttsProcessor.from_pretrained(str(ckpt))

    def run(self, text: str, frames: int, seed: int) -> tuple[float, int, str]:
        torch = self.torch
        inputs = self.processor(text=text)
        out = self.model.generate(**inputs, max_new_tokens=frames, do_sample=True,
                                  generator=torch.Generator().manual_seed(seed), return_dict_in_generate=True)
        wav, lengths = self.model.decode_audio(out.codes)
        return int(lengths[0]) / 44100, int(out.codes.shape[-1]), _hash(out.codes[0].numpy())

    def first_audio(self, text: str, frames: int, seed: int) -> float:
        t0 = time.perf_counter()
        self.run(text, frames, seed)
        return time.perf_counter() - t0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("side", choices=["ours", "upstream"])
    parser.add_argument("ckpt", type=Path)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--frames", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--text", default="The quick brown fox jumps over the lazy dog.")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--upstream", type=Path, default=Path("/work/upstream/audio8"))
    args = parser.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    side = (Ours(args.ckpt, args.dtype) if args.side == "ours"
            else Upstream(args.ckpt, args.dtype, args.upstream))
    load_s = time.perf_counter() - t0
    side.run(args.text, 2, args.seed)  # warm-up: first touch of every weight page
    reset = reset_peak()
    walls, audio_s, frames, codes = [], 0.0, 0, ""
    for _ in range(args.repeats):
        t = time.perf_counter()
        audio_s, frames, codes = side.run(args.text, args.frames, args.seed)
        walls.append(time.perf_counter() - t)
    ttfa = [side.first_audio(args.text, args.frames, args.seed) for _ in range(args.repeats)]
    print(json.dumps({
        "side": args.side, "dtype": args.dtype, "threads": torch.get_num_threads(), "load_s": load_s,
        "walls": walls, "audio_s": audio_s, "frames": frames, "codes": codes, "ttfa": ttfa,
        "peak_rss_gen_mb": status_bytes("VmHWM") / 2**20 if reset else None,
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
