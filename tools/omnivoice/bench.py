"""OmniVoice benchmark: ours against upstream (PyPI omnivoice 0.2.1) in the same run.

Builds (once, cached under ``$AUDIOCPP_CACHE_DIR/bench/omnivoice-full``) a full-size
random-weight checkpoint with upstream's classes (Qwen3-0.6B dims, full-size Higgs codec),
then synthesizes one fixed ~80-character sentence as 5 s of audio with 16 MaskGIT steps and
guidance 2.0 (seeded default sampling) with upstream fp32, ours fp32 and ours bf16, each in
its own process (model load excluded from the timings; one warm-up run each, then
``--repeats`` timed rounds, the implementations taking turns within each round). Prints wall
time (median, min..max), RTF (wall / 5 s), peak RSS, the ours/upstream ratio, whether ours fp32
reproduced upstream's tokens, and the bf16 drift.

Usage: python tools/bench.py omnivoice [--repeats 3] [--model DIR] [--skip-upstream] [--no-bf16]
                                       [--package omnivoice-q8_0.gguf]
       python tools/bench.py omnivoice --weights f32,bf16,q8_0 [--repeats 2] [--threads 1]
       python tools/bench.py omnivoice --batch 1,2,4,8 [--weights q8_0,f32] [--duration 5 --steps 16]

``--weights``: the same checkpoint packaged in each weight type and run side by side with the
default options (tools/weights_bench.py): wall, RTF, peak RSS, load time, drift against the first.
``--profile``: where one request's time goes, stage by stage, in float32 and Q8_0, against the
machine's GEMM rate and bandwidth (tools/profile_bench.py).

``--batch``: batched generation against the same requests one after another (tools/batch_bench.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

import numpy as np

from tools.bench_common import loadavg, require, run_worker_process, worker_env
from tools.bench_sides import add_mode_options, alternate, print_sides, run_modes

REPO = Path(__file__).resolve().parents[2]
TOOLS = Path(__file__).resolve().parent
REF_PYTHON = REPO / ".ref-envs" / "omnivoice" / "bin" / "python"
TEXT = "The old lighthouse keeper climbed the stairs slowly, counting each step he took."


def cache_root() -> Path:
    env = os.environ.get("AUDIOCPP_CACHE_DIR")
    return (Path(env).expanduser() if env else Path.home() / ".cache" / "audiocpp") / "bench"


def ensure_model(path: Path | None) -> Path:
    if path is not None:
        return path
    target = cache_root() / "omnivoice-full"
    if (target / "audio_tokenizer" / "model.safetensors").is_file():
        return target
    if not REF_PYTHON.exists():
        raise SystemExit("the reference env is missing: bash tools/reference_envs/omnivoice.sh")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".omnivoice-full-", dir=target.parent))
    print(f"building the full-size random checkpoint in {target} (once) ...", file=sys.stderr)
    subprocess.run([str(REF_PYTHON), str(TOOLS / "checkpoint.py"), str(tmp / "m"), "--size", "full"],
                   check=True, stdout=subprocess.DEVNULL)
    os.replace(tmp / "m", target)
    shutil.rmtree(tmp, ignore_errors=True)
    return target


def worker_command(python: Path, impl: str, model: Path, args, dtype: str) -> list[str]:
    return [str(python), str(TOOLS / "bench_worker.py"), "--impl", impl, "--model", str(model),
            "--text", TEXT, "--duration", str(args.duration), "--steps", str(args.steps),
            "--compute-dtype", dtype]


def interleaved(plan: list, args) -> dict[str, dict]:
    """Start one serving worker per implementation (loaded one at a time: memory and disk), then time
    them in turns (A B C A B C ...; the first round is the warm-up), so that the machine's other load
    falls on all of them alike."""
    procs = {}
    for name, python, impl, model, dtype, save in plan:
        cmd = [*worker_command(python, impl, model, args, dtype), "--save", str(save), "--serve"]
        procs[name] = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                       env=worker_env())
        _ask(name, procs[name], None)  # loaded
    runs = alternate({name: partial(_ask, name, proc, "run") for name, proc in procs.items()},
                     args.repeats + 1)
    rows = {}
    for name, proc in procs.items():
        rows[name] = {**_ask(name, proc, "quit"), "walls": [r["wall"] for r in runs[name][1:]]}
        proc.wait()
    return rows


def _ask(name: str, proc: subprocess.Popen, command: str | None) -> dict:
    """Send a serving worker a command (``run``, ``quit``; None: none) and read its JSON reply."""
    if command is not None:
        proc.stdin.write(command + "\n")
        proc.stdin.flush()
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"{name}: the worker died (exit {proc.wait()})")
    return json.loads(line)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--skip-upstream", action="store_true")
    ap.add_argument("--no-bf16", action="store_true")
    ap.add_argument("--package", help="also time ours on a package in the default compute mode (auto): a "
                    "GGUF path, or a weight type (q8_0, bf16...): the benchmark checkpoint packaged so once")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads of the --weights workers (--batch / --profile: at least 2)")
    add_mode_options(ap, size=None)
    args = ap.parse_args(argv)
    model = ensure_model(args.model)
    from audiocpp.engine.nn.kernels.cpu_isa import native_bf16

    if not native_bf16():  # emulated bfloat16 runs at well under 1 GFLOP/s: hours for one request
        args.no_bf16 = True
    if args.package is not None:
        from tools.weights_bench import WEIGHT_TYPES, ensure_package

        args.package = (ensure_package("omnivoice", model, args.package) if args.package in WEIGHT_TYPES
                        else Path(args.package))
    size = ["--duration", str(args.duration), "--steps", str(args.steps)]
    if run_modes(args, "omnivoice", model, size=size, threads=max(2, args.threads),
                 weights_threads=args.threads, profile_repeats=2):
        return 0
    work = Path(tempfile.mkdtemp(prefix="omnivoice-bench-"))
    print(f"model {model}; text {len(TEXT)} chars; {args.duration} s, {args.steps} steps, guidance 2.0; "
          f"{args.repeats} timed runs after 1 warm-up; load average before: {loadavg(2)}")
    plan = []
    if not args.skip_upstream:
        require(REF_PYTHON, "tools/reference_envs/omnivoice.sh")
        plan.append(("upstream fp32", REF_PYTHON, "upstream", model, "float32", work / "upstream.npz"))
    plan.append(("ours fp32", Path(sys.executable), "ours", model, "float32", work / "ours.npz"))
    if not args.no_bf16:
        plan.append(("ours bf16", Path(sys.executable), "ours", model, "bfloat16", work / "bf16.npz"))
    if args.package is not None:
        plan.append((f"ours {args.package.stem}"[:15], Path(sys.executable), "ours", args.package, "auto",
                     work / "package.npz"))
    rows = interleaved(plan, args)
    base = rows.get("upstream fp32")
    print_sides(f"{args.repeats} timed rounds, peak RSS of the whole process", rows,
                ratios=[(name, "upstream fp32") for name in rows], rss=("peak RSS", "peak_rss_mb"))
    print(f"load average after: {loadavg(2)}")
    ours_tokens = np.load(work / "ours.npz")["tokens"]
    if base:
        same = base["tokens_sha"] == rows["ours fp32"]["tokens_sha"]
        up = np.load(work / "upstream.npz")
        print(f"ours fp32 tokens == upstream tokens: {same} "
              f"({int((up['tokens'] == ours_tokens).sum())}/{ours_tokens.size})")
    if not args.no_bf16:
        bf16 = np.load(work / "bf16.npz")["tokens"]
        cmd = [*worker_command(Path(sys.executable), "ours", model, args, "bfloat16"), "--drift"]
        d = run_worker_process(cmd, "ours bf16 drift")
        print(f"bf16 drift vs fp32: step-0 logits max |diff| {d['logits_max_abs_diff']}, relative RMS "
              f"{d['logits_rel_rms']:.2e}; step-0 greedy predictions {d['step0_greedy_equal']:.4f} equal; "
              f"final tokens {int((bf16 == ours_tokens).sum())}/{ours_tokens.size} equal "
              "(random weights: MaskGIT amplifies any difference)")
    if args.package is not None:
        pk = np.load(work / "package.npz")["tokens"]
        print(f"{args.package.name}: final tokens {int((pk == ours_tokens).sum())}/{ours_tokens.size} "
              "equal to fp32")
    print(json.dumps({"rows": rows}))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
