"""The benchmark workers' fixed requests, per family, in one place: the request options of a fixed
length (random weights never stop on their own), the size flags that set it, the session options a
worker takes, the compute dtype a session settled on, and what a result's exactness is read from
(tokens, latents or codes); and the frame of a family worker (tools/<family>/bench_worker.py): its
arguments, our side (the model, its sessions, the request, the first audio) and its timed run. Used
by tools/batch_worker.py, profile_worker.py, weights_worker.py and the family workers; standard
library only at import (upstream's side runs in a reference env)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tools.bench_common import first_audio_time, loadavg, measure_side

#: Every family's sampling in the benchmarks: the upstream defaults, stated.
GUIDANCE = 2.0
VOXCPM_STEPS = 10
KOKORO_VOICE = "jf_alpha"  # the first shipped voice; it reads English


def request_options(family: str, *, duration: float = 5.0, steps: int = 16, patches: int = 16,
                    frames: int = 48) -> dict[str, Any]:
    """The options of one fixed-length request: OmniVoice ``duration`` seconds in ``steps`` MaskGIT steps,
    VoxCPM exactly ``patches`` patches, Audio8 ``frames`` frames, Kokoro its text's length."""
    if family == "omnivoice":
        return {"duration": duration, "num_inference_steps": steps, "guidance_scale": GUIDANCE}
    if family in ("voxcpm2", "voxcpm1"):
        return {"min_tokens": patches, "max_tokens": patches, "retry_badcase": False,
                "num_inference_steps": VOXCPM_STEPS, "guidance_scale": GUIDANCE}
    if family == "kokoro":
        return {"voice": KOKORO_VOICE}
    return {"max_new_tokens": frames}


def add_request_size(ap: argparse.ArgumentParser, *, patches: int = 16, frames: int = 48) -> None:
    """The size flags of :func:`request_options` (each family reads its own)."""
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--patches", type=int, default=patches)
    ap.add_argument("--frames", type=int, default=frames)


def sized_options(family: str, args: argparse.Namespace) -> dict[str, Any]:
    """:func:`request_options` at the size ``args`` (from :func:`add_request_size`) asks for."""
    return request_options(family, duration=args.duration, steps=args.steps, patches=args.patches,
                           frames=args.frames)


def add_session_options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--compute-dtype", default="auto")
    ap.add_argument("--session-option", action="append", default=[], metavar="KEY=VALUE",
                    help="a session option (repeatable), e.g. codec_dtype=bfloat16")


def session_options(args: argparse.Namespace) -> dict[str, str]:
    """The session's options: ``compute_dtype`` unless ``auto``, and every ``--session-option``."""
    options = {} if args.compute_dtype == "auto" else {"compute_dtype": args.compute_dtype}
    options.update(item.split("=", 1) for item in args.session_option)
    return options


def compute_dtype_of(session: Any) -> str:
    """The compute dtype (or mode) a session settled on, as its name."""
    decoder = getattr(session, "decoder", None)
    dtype = (getattr(session, "dtype", None) or getattr(decoder, "compute_dtype", None)
             or getattr(session, "compute", ""))
    return str(dtype).removeprefix("torch.")


def worker_fields(family: str, path: Path, session: Any) -> dict[str, Any]:
    """What every tool worker's record states: the family, the package, the compute dtype, torch's threads and
    the load average while it ran."""
    import torch

    return {"family": family, "path": str(path), "compute_dtype": compute_dtype_of(session),
            "threads": torch.get_num_threads(), "loadavg": loadavg()}


def output_of(family: str, result: Any) -> Any:
    """What a result's exactness is read from: OmniVoice's tokens, VoxCPM's latents, Audio8's codes."""
    details = result.details
    if family == "omnivoice":
        return details["tokens"][0]
    if family in ("voxcpm2", "voxcpm1"):
        return details["latents"][0]
    return details["codes"][0]


def codec_of(family: str, model: Any) -> Any:
    return model.codec if family == "omnivoice" else model.parts.codec


# -- a family worker: one side of tools/<family>/bench.py, in its own process -----------------------------
def side_arguments(size: str, default: int, *, repeats: int) -> argparse.ArgumentParser:
    """``SIDE CKPT --dtype --<size> --repeats --text --seed --threads``: a family worker's arguments."""
    parser = argparse.ArgumentParser()
    parser.add_argument("side", choices=["ours", "upstream"])
    parser.add_argument("ckpt", type=Path)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument(size, type=int, default=default)
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--text", default="The quick brown fox jumps over the lazy dog.")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--threads", type=int, default=0)
    return parser


class OursSide:
    """Our side of a family benchmark: the checkpoint loaded by the family, an offline and a streaming
    ``tts`` session (``session``: their options), the fixed request of a size (``options``) and the time
    to its first audio event in streaming."""

    def __init__(self, family: str, path: Path, options: Callable[[int], dict[str, Any]], *,
                 session: dict[str, Any] | None = None, streaming: bool = True) -> None:
        from audiocpp.engine.records import TaskRequest
        from audiocpp.engine.registry import get_family

        self.TaskRequest, self.options = TaskRequest, options
        self.model = get_family(family).load(path)
        self.offline = self.model.session("tts", "offline", **(session or {}))
        self.streaming = self.model.session("tts", "streaming", **(session or {})) if streaming else None

    def request(self, text: str, size: int, seed: int) -> Any:
        return self.TaskRequest(text=text, seed=seed, options=self.options(size))

    def result(self, text: str, size: int, seed: int) -> Any:
        return self.offline.run(self.request(text, size, seed))

    def first_audio(self, text: str, size: int, seed: int) -> float:
        return first_audio_time(self.streaming.stream(self.request(text, size, seed)),
                                lambda event: not event.is_final)


def run_side(args: argparse.Namespace, make: Callable[[], Any], size: int,
             fields: Callable[[Any], dict[str, Any]]) -> None:
    """Time one side (``make()`` loads it; its ``run(text, size, seed)`` and ``first_audio(...)``): a warm-up
    of size 2, ``args.repeats`` runs of ``size`` and as many first-audio runs; print the JSON record with
    the family's ``fields`` of the last run's result."""
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    record, last = measure_side(make, lambda side: side.run(args.text, size, args.seed), args.repeats,
                                warm_up=lambda side: side.run(args.text, 2, args.seed),
                                first_audio=lambda side: side.first_audio(args.text, size, args.seed))
    print(json.dumps({"side": args.side, "dtype": args.dtype, "threads": torch.get_num_threads(), **record,
                      **fields(last)}))
