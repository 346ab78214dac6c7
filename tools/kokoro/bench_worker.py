"""One side of the Kokoro benchmark, in its own process (project venv: ours and onnxruntime; upstream's
KModel runs tools/kokoro/bench_upstream.py in the reference env).

    python tools/kokoro/bench_worker.py {ours|ort} REQUEST.json MODEL --threads N --repeats R

Loads, runs once to warm up, then ``--repeats`` timed runs of the request; the last stdout line is JSON:
walls, audio seconds, frames, load time, peak RSS while generating.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from tools.bench_common import measure_side  # noqa: E402


def ours(request: dict, model_path: str, threads: int):
    import torch

    import audiocpp.engine as ac

    torch.set_num_threads(threads)
    model = ac.load(model_path)
    session = model.session("tts")

    def run():
        result = session.run(ac.TaskRequest(text=request["phonemes"], seed=1,
                                            options={"phonemes": True, "voice": request["voice"]}))
        return result.audio.duration, sum(result.details["pred_dur"][0])

    return run


def ort(request: dict, model_path: str, threads: int):
    import numpy as np
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
    tokens = np.array([[0, *request["ids"], 0]], dtype=np.int64)
    style = np.load(request["style"]).reshape(1, -1).astype(np.float32)

    def run():
        audio = session.run(None, {"tokens": tokens, "style": style, "speed": np.array([1.0], np.float32)})[0]
        return audio.size / 24000, audio.size // 600

    return run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("side", choices=["ours", "ort"])
    parser.add_argument("request", type=Path)
    parser.add_argument("model")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    request = json.loads(args.request.read_text(encoding="utf-8"))
    load = ours if args.side == "ours" else ort
    record, (audio_s, frames) = measure_side(lambda: load(request, args.model, args.threads),
                                             lambda run: run(), args.repeats)
    print(json.dumps({"side": args.side, **record, "audio_s": audio_s, "frames": int(frames)}))


if __name__ == "__main__":
    main()
