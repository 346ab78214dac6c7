#!/usr/bin/env python3
"""``audiocpp book`` at ``--batch-size 8`` against ``--batch-size 1``, in the same run (docs/book.md,
"Figures").

    python tools/book_bench.py [--families audio8_tts,voxcpm1] [--rounds 3] [--threads 2]
                               [--frames 48] [--patches 16] [--json OUT] [--tiny]

The book is one chapter of about 2,000 characters (a title and 22 sentences: 23 chunks, one of them
the narrator's, synthesized alone first), written to a Markdown file; the output an ``.m4b`` mastered
for ACX, as a user would make it. Each run is the real command in its own process with a fresh work
folder (nothing reused), timed from start to exit, and its ``key=value`` summary read back: the
model's load, synthesis, assembly, mastering and encoding times. The two batch sizes alternate
(``--rounds`` of each, the first size of a round swapped every round, so a busy period of a shared
machine hits both) and the medians are printed with their spread, the ratios 1/8 of the wall time
and of synthesis, and the time assembly, mastering and encoding add as a share of synthesis.

Models: the real-dimension, random-weight Q8_0 packages of Audio8 0.6B and VoxCPM1 0.5B that the
family benchmarks make once (``<bench dir>/audio8_tts-q8_0.gguf``, ``<bench dir>/voxcpm1-q8_0.gguf``;
``$AUDIOCPP_BENCH_DIR``, default ``~/.cache/audiocpp-bench``), made here the same way when missing.
Random weights never stop on their own, so every chunk has a fixed length: ``--frames`` Audio8 frames
(``max_new_tokens``), ``--patches`` VoxCPM1 patches (``min_tokens`` = ``max_tokens``).

``--tiny``: the tests' tiny models instead (Audio8's in tests/data, a tiny VoxCPM1 written to a
temporary folder), 2 rounds of short chunks: checks the tool in about a minute; its figures mean
nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script
    sys.path.insert(0, str(REPO))

from tools.bench_common import bench_dir, spread, worker_env, write_json  # noqa: E402
from tools.bench_sides import alternate  # noqa: E402

FAMILIES = ("audio8_tts", "voxcpm1")
BATCH_SIZES = (8, 1)
TITLE = "The Long Crossing"
#: 22 sentences, about 2,000 characters: one long chapter
SENTENCES = [
    "The ferry left the northern harbour a little after six, while the town was still asleep.",
    "Fog lay over the water in long grey banks, and the lamps on the pier made soft yellow rings in it.",
    "Marta stood at the rail with her coat buttoned to the chin and watched the lights grow small.",
    "She had made this crossing every summer as a child, but never alone and never in the cold.",
    "Below deck a radio played an old song about a sailor who forgot the way home.",
    "The engine settled into a steady rhythm that she felt through the soles of her boots.",
    "An hour out, the fog began to lift, and the sea opened up around them, wide and silver.",
    "A pair of gulls followed the wake, dipping and rising as if they were tied to the boat by string.",
    "The captain came out once to look at the sky, nodded to no one in particular, and went back in.",
    "Marta thought about the letter in her pocket and the house at the end of the island road.",
    "Her grandmother had lived there for sixty years, and now the house was hers to keep or to sell.",
    "She did not know yet which she would choose, and the not knowing sat in her chest like a stone.",
    "By nine the island showed as a dark line on the horizon, low and green at its edges.",
    "The wind turned and carried the smell of cut grass and wood smoke across the water.",
    "A boy with a red cap ran along the deck, shouting that he could see the lighthouse.",
    "Everyone turned to look, and for a moment the whole boat was quiet, watching the white tower.",
    "The ferry slowed as it came into the bay, and the water turned from grey to a clear pale blue.",
    "On the quay a small crowd waited, waving at faces they knew, holding dogs and parcels and bikes.",
    "Marta picked up her bag, took one last look at the open sea, and walked down the ramp.",
    "Her cousin Jonas was there, older and greyer than she remembered, with the same crooked smile.",
    "He took her bag without a word, and together they set off along the road that climbed the hill.",
    "Whatever she decided, she knew the island would be waiting for her, patient as the tide.",
]


def write_chapter(path: Path) -> int:
    """The chapter as Markdown (a title and two paragraphs); its characters."""
    body = [" ".join(SENTENCES[:11]), " ".join(SENTENCES[11:])]
    path.write_text(f"# {TITLE}\n\n" + "\n\n".join(body) + "\n", encoding="utf-8")
    return sum(len(s) for s in SENTENCES)


# -- models ------------------------------------------------------------------------------------------
def real_package(family: str, audio8_upstream: Path) -> Path:
    """The family's real-dimension Q8_0 package in the bench folder (the family benchmarks' own)."""
    from tools.weights_bench import ensure_package

    path = bench_dir() / f"{family}-q8_0.gguf"
    if path.is_file():
        return path
    if family == "audio8_tts":
        from tools.audio8_tts.bench import ensure_checkpoint as audio8_checkpoint

        folder = audio8_checkpoint(bench_dir(), audio8_upstream)
    else:
        from tools.voxcpm1.bench import ensure_checkpoint as voxcpm1_checkpoint

        folder = voxcpm1_checkpoint(bench_dir())
    return ensure_package(family, folder, "q8_0")


def tiny_model(family: str, scratch: Path) -> Path:
    if family == "audio8_tts":
        return REPO / "tests" / "data" / "audio8_tts" / "tiny"
    from tools.voxcpm1.checkpoint import TINY_05B, write_v1_checkpoint

    return write_v1_checkpoint(scratch / "voxcpm1-tiny", TINY_05B, seed=1234, weights="bin")


def chunk_options(family: str, frames: int, patches: int) -> list[str]:
    if family == "audio8_tts":
        return ["-r", f"max_new_tokens={frames}"]
    return ["-r", f"min_tokens={patches}", "-r", f"max_tokens={patches}", "-r", "retry_badcase=false"]


# -- one run -------------------------------------------------------------------------------------------
def run_book(
    chapter: Path, model: Path, batch_size: int, scratch: Path, options: list[str], threads: int
) -> dict:
    """One ``audiocpp book`` process with a fresh work folder: its wall time and summary."""
    folder = Path(tempfile.mkdtemp(prefix=f"bs{batch_size}-", dir=scratch))
    cmd = [
        sys.executable,
        "-c",
        "from audiocpp.cli.main import main; main()",
        "book",
        str(chapter),
        "--model",
        str(model),
        "--out",
        str(folder / "book.m4b"),
        "--batch-size",
        str(batch_size),
        "--threads",
        str(threads),
        "--seed",
        "11",
        "--quiet",
        *options,
    ]
    env = {**worker_env(), "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    shutil.rmtree(folder, ignore_errors=True)
    if proc.returncode != 0:
        raise SystemExit(
            f"audiocpp book --batch-size {batch_size} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
        )
    summary = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    return {
        "batch_size": batch_size,
        "wall_s": wall,
        "chunks": int(summary["chunks"]),
        "synthesized": int(summary["synthesized"]),
        "audio_s": float(summary["audio_s"]),
        **{
            key: float(summary.get(key, 0.0))
            for key in ("load_s", "synth_s", "assemble_s", "master_s", "encode_s", "total_s")
        },
    }


def bench_family(family: str, model: Path, chapter: Path, args: argparse.Namespace, scratch: Path) -> dict:
    options = chunk_options(family, args.frames, args.patches)

    def fresh_run(size: int) -> dict:
        run = run_book(chapter, model, size, scratch, options, args.threads)
        if run["synthesized"] != run["chunks"]:
            raise SystemExit(f"a run reused {run['chunks'] - run['synthesized']} chunks: not a fresh run")
        return run

    def report(round_: int, size: int, run: dict) -> None:
        print(f"  {family} round {round_ + 1}/{args.rounds} --batch-size {size}: "
              f"wall {run['wall_s']:.2f} s, synthesis {run['synth_s']:.2f} s", file=sys.stderr, flush=True)

    # the first size of a round swapped every round (8 1, 1 8, ...)
    runs = alternate({size: partial(fresh_run, size) for size in BATCH_SIZES}, args.rounds, swap=True,
                     report=report)
    return {"family": family, "model": str(model), "threads": args.threads, "options": options, "runs": runs}


def median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def post(run: dict) -> float:
    return run["assemble_s"] + run["master_s"]


def print_family(result: dict, chars: int) -> None:
    runs = result["runs"]
    first = runs[BATCH_SIZES[0]][0]
    print(
        f"\n== {result['family']}: {Path(result['model']).name}, one chapter of {chars} characters "
        f"({first['chunks']} chunks, {first['audio_s']:.1f} s of audio), .m4b mastered for ACX, "
        f"{result['threads']} thread(s), {len(runs[BATCH_SIZES[0]])} runs per batch size, "
        f"{' '.join(result['options'][1::2])}"
    )
    print(
        f"{'batch':>5s} {'wall median (min..max)':26s} {'synthesis':26s} {'load':>7s} {'assemble':>9s} "
        f"{'master':>7s} {'encode':>7s} {'asm+master/synth':>17s} {'+encode':>8s}"
    )
    for size in BATCH_SIZES:
        r = runs[size]
        share = statistics.median(post(x) / x["synth_s"] for x in r if x["synth_s"] > 0)
        total = statistics.median((post(x) + x["encode_s"]) / x["synth_s"] for x in r if x["synth_s"] > 0)
        print(
            f"{size:5d} {spread([x['wall_s'] for x in r]):26s} {spread([x['synth_s'] for x in r]):26s} "
            f"{median(r, 'load_s'):6.2f}s {median(r, 'assemble_s'):8.2f}s {median(r, 'master_s'):6.2f}s "
            f"{median(r, 'encode_s'):6.2f}s {100 * share:16.1f}% {100 * total:7.1f}%"
        )
    one, eight = runs[1], runs[8]
    print(
        f"--batch-size 8 against 1: wall {median(one, 'wall_s') / median(eight, 'wall_s'):.2f}x faster, "
        f"synthesis {median(one, 'synth_s') / median(eight, 'synth_s'):.2f}x faster"
    )
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tools/book_bench.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", default=",".join(FAMILIES), help="audio8_tts, voxcpm1 or both")
    parser.add_argument("--rounds", type=int, help="runs per batch size (default 3; --tiny 2)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of each run")
    parser.add_argument("--frames", type=int, help="Audio8 frames per chunk (default 48; --tiny 10)")
    parser.add_argument("--patches", type=int, help="VoxCPM1 patches per chunk (default 16; --tiny 6)")
    parser.add_argument("--tiny", action="store_true", help="the tests' tiny models (checks the tool)")
    parser.add_argument(
        "--audio8-upstream",
        type=Path,
        default=Path("/work/upstream/audio8"),
        help="Audio8_TTS checkout (only to build the Audio8 checkpoint when it is missing)",
    )
    parser.add_argument("--json", type=Path, help="also write every run's figures here")
    args = parser.parse_args(argv)
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    bad = [f for f in families if f not in FAMILIES]
    if bad or not families:
        parser.error(f"--families takes {' and/or '.join(FAMILIES)}; got {args.families!r}")
    args.rounds = args.rounds or (2 if args.tiny else 3)
    args.frames = args.frames or (10 if args.tiny else 48)
    args.patches = args.patches or (6 if args.tiny else 16)
    if args.rounds < 1 or args.threads < 1 or args.frames < 1 or args.patches < 1:
        parser.error("--rounds, --threads, --frames and --patches must be at least 1")
    results = []
    with tempfile.TemporaryDirectory(prefix="book-bench-") as tmp:
        scratch = Path(tmp)
        chapter = scratch / "chapter.md"
        chars = write_chapter(chapter)
        for family in families:
            model = tiny_model(family, scratch) if args.tiny else real_package(family, args.audio8_upstream)
            print(f"{family}: {model}", file=sys.stderr, flush=True)
            result = bench_family(family, model, chapter, args, scratch)
            print_family(result, chars)
            results.append(result)
    write_json(args.json, {"chars": chars, "results": results, "loadavg": os.getloadavg()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
