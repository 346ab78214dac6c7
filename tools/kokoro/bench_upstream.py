"""Upstream's side of the Kokoro benchmark: hexgrad's KModel (PyPI kokoro 0.9.4, float32) in the reference
env on the real weights in hexgrad's layout (tools/kokoro/bench_setup.py), the same token ids and style row.

    .ref-envs/kokoro/bin/python tools/kokoro/bench_upstream.py REQUEST.json FOLDER --threads N --repeats R
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")


def _bench_common():
    """tools/bench_common.py by path (tools/ on sys.path would shadow the ``kokoro`` package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_common", Path(__file__).resolve().parents[1] /
                                                  "bench_common.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    import numpy as np
    import torch
    from kokoro import KModel

    common = _bench_common()

    parser = argparse.ArgumentParser()
    parser.add_argument("request", type=Path)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    request = json.loads(args.request.read_text(encoding="utf-8"))
    ids = torch.LongTensor([[0, *request["ids"], 0]])
    style = torch.from_numpy(np.load(request["style"]).reshape(1, -1))

    def load():
        config = json.loads((args.folder / "config.json").read_text(encoding="utf-8"))
        weights = str(args.folder / "kokoro-v1_0.pth")
        return KModel(repo_id="hexgrad/Kokoro-82M", config=config, model=weights).eval()

    def run(model):
        torch.manual_seed(1)
        audio, dur = model.forward_with_tokens(ids, style, 1.0)
        return audio.numel() / 24000, int(dur.sum())

    record, (audio_s, frames) = common.measure_side(load, run, args.repeats)
    print(json.dumps({"side": "hexgrad", **record, "audio_s": audio_s, "frames": frames}))


if __name__ == "__main__":
    main()
