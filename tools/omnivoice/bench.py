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
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

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


def worker(python: Path, impl: str, model: Path, args, save: Path | None, dtype: str = "float32",
           extra: tuple[str, ...] = ()) -> dict:
    cmd = [str(python), str(TOOLS / "bench_worker.py"), "--impl", impl, "--model", str(model), "--text", TEXT,
           "--duration", str(args.duration), "--steps", str(args.steps), "--repeats", str(args.repeats),
           "--compute-dtype", dtype, *(("--save", str(save)) if save else ()), *extra]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{impl} ({dtype}) failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def interleaved(plan: list, args) -> list[tuple[str, dict]]:
    """Start one serving worker per implementation, warm each up, then time them in turns
    (A B C A B C ...), so that the machine's other load falls on all of them alike."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    procs = []
    for name, python, impl, model, dtype, save in plan:
        cmd = [str(python), str(TOOLS / "bench_worker.py"), "--impl", impl, "--model", str(model),
               "--text", TEXT, "--duration", str(args.duration), "--steps", str(args.steps),
               "--compute-dtype", dtype, "--save", str(save), "--serve"]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        procs.append((name, proc))
        _reply(name, proc)  # loaded; load one at a time (memory and disk)

    walls: dict[str, list[float]] = {name: [] for name, _ in procs}
    for round_ in range(args.repeats + 1):  # round 0 is the warm-up
        for name, proc in procs:
            proc.stdin.write("run\n")
            proc.stdin.flush()
            wall = _reply(name, proc)["wall"]
            if round_ > 0:
                walls[name].append(wall)
    rows = []
    for name, proc in procs:
        proc.stdin.write("quit\n")
        proc.stdin.flush()
        rows.append((name, {**_reply(name, proc), "walls": walls[name]}))
        proc.wait()
    return rows


def _reply(name: str, proc: subprocess.Popen) -> dict:
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"{name}: the worker died (exit {proc.wait()})")
    return json.loads(line)


def loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


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
    ap.add_argument("--weights", help="f32,bf16,q8_0: package the checkpoint in each type, run ours on each")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of the --weights workers")
    ap.add_argument("--device", help="device of the --weights workers (default: auto)")
    ap.add_argument("--batch", help="1,2,4,8: batched generation against sequential (tools/batch_bench.py)")
    ap.add_argument("--profile", action="store_true",
                    help="where one request's time goes, stage by stage (tools/profile_bench.py); "
                    "with --batch N: of N requests as one batch")
    args = ap.parse_args(argv)
    model = ensure_model(args.model)
    from audiocpp.engine.nn.cpu_isa import native_bf16

    if not native_bf16():  # emulated bfloat16 runs at well under 1 GFLOP/s: hours for one request
        args.no_bf16 = True
    if args.package is not None:
        from tools.weights_bench import WEIGHT_TYPES, ensure_package

        args.package = (ensure_package("omnivoice", model, args.package) if args.package in WEIGHT_TYPES
                        else Path(args.package))
    if args.profile:
        from tools.profile_bench import Options as ProfileOptions
        from tools.profile_bench import profile_batch
        from tools.profile_bench import run as run_profile

        size = ["--duration", str(args.duration), "--steps", str(args.steps)]
        opts = ProfileOptions(args.weights or "f32,q8_0", max(2, args.threads), 2, profile_batch(args.batch),
                              size)
        run_profile("omnivoice", model, opts)
        return 0
    if args.batch:
        from tools.batch_bench import Options as BatchOptions
        from tools.batch_bench import run as run_batch

        run_batch("omnivoice", model,
                  BatchOptions(args.batch, args.weights or "q8_0,f32", max(2, args.threads),
                               ["--duration", str(args.duration), "--steps", str(args.steps)]))
        return 0
    if args.weights:
        from tools.weights_bench import Options, run

        run("omnivoice", model, Options(args.weights, args.repeats, args.threads, [
            "--duration", str(args.duration), "--steps", str(args.steps)], args.device))
        return 0
    work = Path(tempfile.mkdtemp(prefix="omnivoice-bench-"))
    print(f"model {model}; text {len(TEXT)} chars; {args.duration} s, {args.steps} steps, guidance 2.0; "
          f"{args.repeats} timed runs after 1 warm-up; load average before: {loadavg()}")
    plan = []
    if not args.skip_upstream:
        plan.append(("upstream fp32", REF_PYTHON, "upstream", model, "float32", work / "upstream.npz"))
    plan.append(("ours fp32", Path(sys.executable), "ours", model, "float32", work / "ours.npz"))
    if not args.no_bf16:
        plan.append(("ours bf16", Path(sys.executable), "ours", model, "bfloat16", work / "bf16.npz"))
    if args.package is not None:
        plan.append((f"ours {args.package.stem}"[:15], Path(sys.executable), "ours", args.package, "auto",
                     work / "package.npz"))
    rows = interleaved(plan, args)
    base = next((r for name, r in rows if name == "upstream fp32"), None)
    print(f"{'implementation':15} {'median s':>9} {'min..max s':>14} {'RTF':>6} {'peak RSS MB':>12} "
          f"{'ratio':>6}")
    for name, r in rows:
        med = statistics.median(r["walls"])
        ratio = f"{med / statistics.median(base['walls']):.3f}" if base else "-"
        print(f"{name:15} {med:9.2f} {min(r['walls']):6.2f}..{max(r['walls']):6.2f} "
              f"{med / args.duration:6.2f} {r['peak_rss_mb']:12.0f} {ratio:>6}")
    print(f"load average after: {loadavg()}")
    ours_tokens = np.load(work / "ours.npz")["tokens"]
    if base:
        same = base["tokens_sha"] == next(r for n, r in rows if n == "ours fp32")["tokens_sha"]
        up = np.load(work / "upstream.npz")
        print(f"ours fp32 tokens == upstream tokens: {same} "
              f"({int((up['tokens'] == ours_tokens).sum())}/{ours_tokens.size})")
    if not args.no_bf16:
        bf16 = np.load(work / "bf16.npz")["tokens"]
        d = worker(Path(sys.executable), "ours", model, args, None, "bfloat16", ("--drift",))
        print(f"bf16 drift vs fp32: step-0 logits max |diff| {d['logits_max_abs_diff']}, relative RMS "
              f"{d['logits_rel_rms']:.2e}; step-0 greedy predictions {d['step0_greedy_equal']:.4f} equal; "
              f"final tokens {int((bf16 == ours_tokens).sum())}/{ours_tokens.size} equal "
              "(random weights: MaskGIT amplifies any difference)")
    if args.package is not None:
        pk = np.load(work / "package.npz")["tokens"]
        print(f"{args.package.name}: final tokens {int((pk == ours_tokens).sum())}/{ours_tokens.size} "
              "equal to fp32")
    print(json.dumps({"rows": {n: r for n, r in rows}}))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
