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

import hashlib
import sys
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script, in the project venv or a reference env
    sys.path.append(str(REPO))
from tools.bench_requests import OursSide, request_options, run_side, side_arguments  # noqa: E402


def _hash(codes) -> str:
    import numpy as np

    return hashlib.sha256(np.ascontiguousarray(np.asarray(codes, dtype=np.int64)).tobytes()).hexdigest()[:16]


class Ours(OursSide):
    def __init__(self, ckpt: Path, dtype: str) -> None:
        # streamed frame by frame: the first audio event after the first frame
        super().__init__("audio8_tts", ckpt, lambda frames: {**request_options("audio8_tts", frames=frames),
                                                             "streaming_chunk_frames": 1},
                         session={"compute_dtype": dtype})

    def run(self, text: str, frames: int, seed: int) -> tuple[float, int, str]:
        result = self.result(text, frames, seed)
        codes = result.details["codes"][0]
        return result.audio.duration, int(codes.shape[1]), _hash(codes)


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
    parser = side_arguments("--frames", 16, repeats=2)
    parser.add_argument("--upstream", type=Path, default=Path("/work/upstream/audio8"))
    args = parser.parse_args(argv)
    run_side(args, lambda: (Ours(args.ckpt, args.dtype) if args.side == "ours"
                            else Upstream(args.ckpt, args.dtype, args.upstream)),
             args.frames, lambda last: {"audio_s": last[0], "frames": last[1], "codes": last[2]})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
