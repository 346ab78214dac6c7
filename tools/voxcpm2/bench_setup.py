"""What the VoxCPM1 and VoxCPM2 benchmarks share: their options, the checkpoint folders per compute dtype,
the worker (tools/voxcpm2/bench_worker.py, both families) and the dtype x threads settings run side by
side against upstream (voxcpm 2.0.3 in .ref-envs/voxcpm)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from tools import bench_sides as sides
from tools.bench_common import bench_dir, write_json

WORKER = sides.Worker(Path(__file__).resolve().with_name("bench_worker.py"), "voxcpm")
TEXT = "The quick brown fox jumps over the lazy dog."


def add_options(parser: argparse.ArgumentParser, *, patches: int, rounds: int, threads: str,
                weights_alone: bool) -> None:
    """The options of both benchmarks (``weights_alone``: ``--weights`` and ``--device`` run
    tools/weights_bench.py on their own, VoxCPM2 only)."""
    parser.add_argument("--patches", type=int, default=patches)
    sides.add_round_options(parser, repeats=3, rounds=rounds, threads=threads)
    parser.add_argument("--dtypes", help="compute dtypes of both sides on the folder (default float32, and "
                        "bfloat16 where the CPU computes it in hardware)")
    parser.add_argument("--package", help="also ours on the checkpoint packaged in this type (q8_0: the "
                        "default package mode, compute auto) against upstream float32")
    sides.add_output_options(parser)
    sides.add_mode_options(parser, size="--patches", default=16, weights_alone=weights_alone,
                           device=weights_alone)


def main(argv: list[str], family: str, doc: str, checkpoint: Callable[[Path], Path], sized: str,
         drift: Callable[[Path, argparse.Namespace], int] | None = None, **defaults: Any) -> int:
    """``tools/bench.py voxcpm2|voxcpm1``: parse the options (``defaults``: --patches, --rounds, --threads),
    build the ``checkpoint`` once, then run the mode asked for (--profile, --batch, VoxCPM2's --weights,
    VoxCPM1's ``--drift``) or the settings side by side (``sized`` names the checkpoint's size)."""
    parser = argparse.ArgumentParser(prog=f"tools/bench.py {family}", description=doc.split("\n\n")[0])
    weights_alone = family == "voxcpm2"  # tools/weights_worker.py has no VoxCPM1
    add_options(parser, weights_alone=weights_alone, **defaults)
    if drift is not None:
        parser.add_argument("--drift", action="store_true",
                            help="measure reduced-precision drift instead (see above)")
    args = parser.parse_args(argv)
    base = checkpoint(bench_dir())
    if sides.run_modes(args, family, base, size=["--patches", str(args.patches)],
                       long_size=sides.size_or(argv, "--patches", args.patches, 16), threads=2,
                       weights_threads=sides.thread_counts(args.threads)[0], weights_alone=weights_alone):
        return 0
    if drift is not None and args.drift:
        return drift(dtype_folders(base)["float32"], args)
    run_settings(args, base, family, sized)
    return 0


def ensure_checkpoint(base: Path, what: str, write: Callable[[Path], Any]) -> Path:
    """The random checkpoint ``base`` (``what``: its size, for the notice), made by ``write`` once."""
    if not (base / "config.json").is_file() or not (base / "audiovae.pth").is_file():
        print(f"building the {what} random checkpoint in {base} (once)...", file=sys.stderr)
        write(base)
    return base


def dtype_folders(base: Path) -> dict[str, Path]:
    """One folder per upstream compute dtype: symlinks to ``base`` with ``config.json``'s dtype set."""
    folders = {}
    for dtype in ("float32", "bfloat16"):
        folder = base.with_name(f"{base.name}-{dtype}")
        folder.mkdir(parents=True, exist_ok=True)
        for item in base.iterdir():
            link = folder / item.name
            if item.name != "config.json" and not link.exists():
                link.symlink_to(item)
        config = json.loads((base / "config.json").read_text(encoding="utf-8"))
        config["dtype"] = dtype
        (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
        folders[dtype] = folder
    return folders


def default_dtypes() -> str:
    """The compute dtypes compared by default: float32, and bfloat16 where the CPU (at the level this
    process runs, ``AUDIOCPP_CPU_ISA``) computes it in hardware; emulated, a bfloat16 run takes hours."""
    from audiocpp.engine.nn.kernels.cpu_isa import native_bf16

    return "float32,bfloat16" if native_bf16() else "float32"


def worker(args: argparse.Namespace, family: str, side: str, ckpt: Path, dtype: str,
           threads: int) -> dict:
    return WORKER.run(side, str(ckpt), "--dtype", dtype, "--patches", str(args.patches), "--repeats",
                      str(args.repeats), "--threads", str(threads), "--text", TEXT, "--family", family)


def process_medians(record: dict) -> str:
    return ", ".join(f"{m:.2f}" for m in record["process_medians"])


def run_settings(args: argparse.Namespace, base: Path, family: str, sized: str) -> list[dict]:
    """Every dtype x threads setting: ``args.rounds`` alternating upstream/ours processes each. With
    ``args.package`` (a weight type), also ours on that package in the default compute mode
    (``auto``) against upstream in float32: the default package mode against upstream's."""
    folders = dtype_folders(base)
    settings = [(dtype, folders[dtype], dtype) for dtype in (args.dtypes or default_dtypes()).split(",")]
    if args.package:
        from tools.weights_bench import ensure_package

        settings.append(("float32", ensure_package(family, base, args.package, family=family), "auto"))
    rows = []
    for dtype, ours_ckpt, ours_dtype in settings:
        for threads in sides.thread_counts(args.threads):
            runs = {"upstream": partial(worker, args, family, "upstream", folders[dtype], dtype, threads),
                    "ours": partial(worker, args, family, "ours", ours_ckpt, ours_dtype, threads)}
            if args.ours_only:
                del runs["upstream"]
            result = {"dtype": dtype, "threads": threads, **sides.alternate_merged(runs, args.rounds)}
            if ours_ckpt != folders[dtype]:
                result["dtype"] = f"upstream {dtype}, ours {ours_ckpt.name} compute {ours_dtype}"
            rows.append(result)
            sides.print_sides(
                f"{sized}, {result['dtype']}, {threads} thread(s), {args.patches} patches, "
                f"{args.rounds} processes x {args.repeats} repeats per side, text {TEXT!r}",
                {s: result[s] for s in ("upstream", "ours") if s in result},
                first_audio="first audio (stream)", extra=("per-process medians", process_medians))
    write_json(args.json, rows)
    return rows
