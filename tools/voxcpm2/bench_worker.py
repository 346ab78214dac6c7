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

import sys
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script, in the project venv or a reference env
    sys.path.append(str(REPO))
from tools.bench_common import first_audio_time  # noqa: E402
from tools.bench_requests import (  # noqa: E402
    GUIDANCE,
    VOXCPM_STEPS,
    OursSide,
    request_options,
    run_side,
    side_arguments,
)


class Ours(OursSide):
    def __init__(self, ckpt: Path, dtype: str, family: str = "voxcpm2") -> None:
        super().__init__(family, ckpt, lambda patches: request_options(family, patches=patches),
                         session={"compute_dtype": dtype})

    def run(self, text: str, patches: int, seed: int) -> tuple[float, int]:
        result = self.result(text, patches, seed)
        return result.audio.duration, result.details["num_patches"][0]


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
        return dict(text=text, cfg_value=GUIDANCE, inference_timesteps=VOXCPM_STEPS, min_len=patches,
                    max_len=patches, normalize=False, denoise=False, retry_badcase=False)

    def run(self, text: str, patches: int, seed: int) -> tuple[float, int]:
        self.torch.manual_seed(seed)
        wav = self.tts.generate(**self._kwargs(text, patches))
        return len(wav) / self.sample_rate, patches

    def first_audio(self, text: str, patches: int, seed: int) -> float:
        self.torch.manual_seed(seed)
        return first_audio_time(self.tts.generate_streaming(**self._kwargs(text, patches)))


def main(argv: list[str]) -> int:
    parser = side_arguments("--patches", 6, repeats=3)
    parser.add_argument("--family", default="voxcpm2", help="our family plugin (voxcpm2 or voxcpm1)")
    args = parser.parse_args(argv)
    run_side(args, lambda: (Ours(args.ckpt, args.dtype, args.family) if args.side == "ours"
                            else Upstream(args.ckpt, args.dtype)),
             args.patches, lambda last: {"audio_s": last[0], "patches": last[1]})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
