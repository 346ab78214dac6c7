"""Throughput of ``audiocpp batch`` on this machine: the same manifest run locally with 1 and 2
workers and on a local Ray instance, through the real CLI, one configuration after the other.

    python -m audiocpp.batch.bench [--items 24] [--family omnivoice] [--model PATH]
                                   [--configs local1,local2,ray2] [--batch-size 1,8]
                                   [-r num_inference_steps=16]

Prints one row per configuration and batch size (``--batch-size``: each configuration once per
value, alternating, so the values compare in the same run): items/s and aggregate RTF over the
whole job (start-up and model loading included) and after ``load_s`` (locally: the first worker
ready; on Ray: the first block back, so Ray's "after load" figures leave out one block of
synthesis and read high), and the mean number of items per batched step.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SENTENCE = ("the quick brown fox jumps over a lazy dog while seven bright stars shine above "
            "the quiet harbour and an old clock keeps striking the hours")
WORDS = SENTENCE.split(" ")


def manifest(path: Path, items: int) -> None:
    """``items`` seeded tts lines of 4 to 24 words (lengths vary, as in a real book)."""
    with path.open("w", encoding="utf-8") as handle:
        for n in range(items):
            size = 4 + (n * 7) % 21
            text = " ".join(WORDS[(n + k) % len(WORDS)] for k in range(size)).capitalize() + "."
            handle.write(json.dumps({"id": f"u{n:04d}", "text": text, "seed": n}) + "\n")


CONFIGS = {
    "local1": ["--workers", "1"],
    "local1t1": ["--workers", "1", "--threads", "1"],
    "local2": ["--workers", "2"],
    "ray1": ["--ray", "--workers", "1", "--num-cpus", str(max(1, (os.cpu_count() or 2)))],
    "ray2": ["--ray", "--workers", "2", "--num-cpus", "1"],
}


def run(config: str, manifest_path: Path, out: Path, model_args: list[str]) -> dict[str, str]:
    cli = Path(sys.executable).parent / "audiocpp"
    proc = subprocess.run([str(cli), "batch", str(manifest_path), "--out-dir", str(out), "--overwrite",
                           "--no-progress", *model_args, *CONFIGS[config]],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise SystemExit(f"{config} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    stats = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    start = next((line for line in proc.stderr.splitlines() if line.startswith("batch:")), "")
    stats["setup"] = start.rsplit("(", 1)[-1].rstrip(")")
    return stats


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=24)
    parser.add_argument("--family", default="omnivoice")
    parser.add_argument("--model")
    parser.add_argument("--configs", default="local1,local2,ray2")
    parser.add_argument("--batch-size", default="8", help="comma-separated --batch-size values")
    parser.add_argument("-r", "--request-option", action="append", default=[])
    args = parser.parse_args(argv)
    model_args = ["--family", args.family] + (["--model", args.model] if args.model else [])
    for option in args.request_option:
        model_args += ["--request-option", option]
    root = Path(tempfile.mkdtemp(prefix="audiocpp-batch-bench-"))
    try:
        manifest(root / "bench.jsonl", args.items)
        print(f"{args.items} items, {args.family} {args.model or '(demo model)'}, {os.cpu_count()} CPUs")
        print(f"{'config':8} {'batch':>5} {'setup':44} {'elapsed_s':>9} {'load_s':>7} {'items/s':>8} "
              f"{'rtf':>6} {'after-load items/s':>18} {'rtf':>6} {'rows/step':>9}")
        for config in args.configs.split(","):
            for size in args.batch_size.split(","):
                stats = run(config, root / "bench.jsonl", root / config, [*model_args, "--batch-size", size])
                elapsed, load = float(stats["elapsed_s"]), float(stats.get("load_s") or 0)
                audio, done = float(stats["audio_s"]), int(stats["done"])
                synth = max(elapsed - load, 1e-9)
                print(f"{config:8} {size:>5} {stats['setup']:44} {elapsed:9.1f} {load:7.1f} "
                      f"{done / elapsed:8.3f} {elapsed / audio:6.3f} {done / synth:18.3f} "
                      f"{synth / audio:6.3f} {stats.get('batch_rows', ''):>9}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
