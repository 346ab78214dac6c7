#!/usr/bin/env python3
"""What a process pays before synthesis, against reading the package from the page cache.

    python tools/startup_bench.py PACKAGE [PACKAGE ...] [--isa avx2,avx512] [--runs 3]

For each package and ISA level (``engine.nn.kernels.cpu_isa.LEVEL_ENV``), with the file in the page cache
(read once first), the medians of ``--runs`` fresh processes of:

- reading the file: ``cat FILE > /dev/null`` (the floor a loader cannot beat);
- ``python -c "import torch"`` (what any PyTorch program pays before its first line);
- a process that imports audiocpp, loads the package and opens a ``tts`` session in the default
  compute mode, i.e. everything before the first synthesis, split into the interpreter and torch,
  audiocpp's imports, ``load()`` and the session (the network built for its compute mode);
- with ``--serve``: ``audiocpp serve --model PACKAGE`` from its start to its first answer (``/health``
  polled every 10 ms; the server loads its models before it listens).

The repository's modules are compiled to bytecode first (as ``pip install`` does; a source tree run
under ``PYTHONDONTWRITEBYTECODE=1`` would otherwise compile every module in every process), and one
process loads each package at each level before the timed ones (the kernels built, the package's
matrices packed into the pack cache once: ``engine.nn.linear.pack_cache``).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script
    sys.path.insert(0, str(REPO))
from tools.bench_common import isa_levels, level_env  # noqa: E402

PROBE = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
import audiocpp.engine as ac
t2 = time.perf_counter()
model = ac.load(sys.argv[1])
t3 = time.perf_counter()
session = model.session("tts")
t4 = time.perf_counter()
print(json.dumps({"torch": t1 - t0, "audiocpp": t2 - t1, "load": t3 - t2, "session": t4 - t3,
                  "mode": getattr(session, "compute", None) and session.compute.name}))
"""


def timed(cmd: list[str], env: dict[str, str], *, output: bool = True) -> tuple[float, str]:
    start = time.perf_counter()
    stdout = subprocess.PIPE if output else subprocess.DEVNULL
    proc = subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} failed:\n{proc.stderr[-2000:]}")
    return time.perf_counter() - start, proc.stdout


def compile_sources() -> None:
    """Byte-compile audiocpp's modules (what an installed package has; a no-op once done)."""
    import compileall

    for folder in ("audiocpp", "engine", "families", "cli", "server", "batch", "book"):
        if (REPO / folder).is_dir():
            compileall.compile_dir(REPO / folder, quiet=2)


def measure(package: Path, level: str | None, runs: int) -> dict:
    env = level_env(level)
    subprocess.run(["cat", str(package)], stdout=subprocess.DEVNULL, check=True)  # into the page cache
    timed([sys.executable, "-c", PROBE, str(package)], env)  # kernels built, matrices in the pack cache
    read = statistics.median(timed(["cat", str(package)], env, output=False)[0] for _ in range(runs))
    torch_only = statistics.median(timed([sys.executable, "-c", "import torch"], env)[0] for _ in range(runs))
    walls, parts = [], []
    for _ in range(runs):
        wall, out = timed([sys.executable, "-c", PROBE, str(package)], env)
        walls.append(wall)
        parts.append(json.loads(out.strip().splitlines()[-1]))
    median = {k: statistics.median(p[k] for p in parts) for k in ("torch", "audiocpp", "load", "session")}
    return {"read": read, "torch_process": torch_only, "wall": statistics.median(walls), **median,
            "mode": parts[0]["mode"], "gib": package.stat().st_size / 2**30}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_ready(package: Path, env: dict[str, str]) -> float:
    """Seconds from starting ``audiocpp serve --model PACKAGE`` to its first ``/health`` answer."""
    port = free_port()
    cli = Path(sys.executable).with_name("audiocpp")
    start = time.perf_counter()
    proc = subprocess.Popen([str(cli), "serve", "--model", str(package), "--port", str(port), "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        while True:
            if proc.poll() is not None:
                why = proc.stderr.read().decode()[-2000:] if proc.stderr else ""
                raise SystemExit(f"audiocpp serve exited ({proc.returncode}):\n{why}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as answer:
                    if answer.status == 200:
                        return time.perf_counter() - start
            except OSError:
                time.sleep(0.01)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("packages", nargs="+", type=Path)
    ap.add_argument("--isa", help="ISA levels, e.g. avx2,avx512 (all: every level this CPU has; default: "
                    "this host as it is)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--serve", action="store_true", help="also time `audiocpp serve` to its first answer")
    args = ap.parse_args(argv)
    levels = isa_levels(args.isa) if args.isa else [None]
    compile_sources()
    print(f"{'package':34s} {'level':8s} {'GiB':>5s} {'read':>6s} {'python+torch':>12s} {'process':>8s} "
          f"{'= torch':>8s} {'+ audiocpp':>10s} {'+ load':>7s} {'+ session':>9s}  process - torch vs read")
    for package in args.packages:
        for level in levels:
            r = measure(package, level, args.runs)
            ours = r["wall"] - r["torch_process"]
            print(f"{package.name:34s} {level or 'native':8s} {r['gib']:5.2f} {r['read']:5.2f}s "
                  f"{r['torch_process']:11.2f}s {r['wall']:7.2f}s {r['torch']:7.2f}s {r['audiocpp']:9.2f}s "
                  f"{r['load']:6.2f}s {r['session']:8.2f}s  {ours:.2f} s = {ours / r['read']:.1f}x the read "
                  f"({r['mode']})", flush=True)
            if args.serve:
                env = level_env(level)
                ready = statistics.median(serve_ready(package, env) for _ in range(args.runs))
                beyond = ready - r["torch_process"]
                print(f"{'':34s} serve: first answer {ready:.2f} s after its start; beyond python+torch "
                      f"{beyond:.2f} s = {beyond / r['read']:.1f}x the read", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
