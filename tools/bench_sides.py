"""What the family benchmarks' orchestrators share (``tools/<family>/bench.py``, run by
``tools/bench.py <family>``): their common options, each side's worker run in its own interpreter,
the sides alternating in rounds of processes, the table of sides with their ratios against the
baseline measured in the same run, and the ``--profile`` / ``--batch`` / ``--weights`` modes at the
family's request size. A family's bench keeps only what is its own: how its checkpoint is built, its
request, its upstream side and its settings."""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from tools.bench_common import merge, ratio, require, run_worker_process, spread

REPO = Path(__file__).resolve().parents[1]
OURS_PY = REPO / ".venv" / "bin" / "python"
K = TypeVar("K")


# -- options -------------------------------------------------------------------------------------------
def add_round_options(parser: argparse.ArgumentParser, *, repeats: int, rounds: int, threads: str) -> None:
    """``--repeats`` (timed runs per process), ``--rounds`` (processes per side and setting, the sides
    taking turns) and ``--threads`` (comma-separated torch thread counts)."""
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--rounds", type=int, default=rounds,
                        help="processes per side and setting, the sides taking turns")
    parser.add_argument("--threads", default=threads, help="comma-separated torch thread counts")


def add_output_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ours-only", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the raw results here")


def add_mode_options(parser: argparse.ArgumentParser, *, size: str | None, default: int | None = None,
                     weights_alone: bool = True, device: bool = True) -> None:
    """``--weights``, ``--device``, ``--batch`` and ``--profile`` (:func:`run_modes`); ``size`` is the flag of
    the request's size (``--patches``, ``--frames``) and ``default`` its value with --batch / --profile."""
    sized = f"{size} per request (default {default}), " if size else ""
    if weights_alone:
        parser.add_argument("--weights", help="f32,bf16,q8_0: package the checkpoint in each type, run ours "
                            "on each (tools/weights_bench.py); with --batch / --profile: their weight types")
    else:
        parser.add_argument("--weights", help="with --batch / --profile: the weight types")
    if device:
        parser.add_argument("--device", help="device of the --weights workers (default: auto)")
    parser.add_argument("--batch", help=f"1,2,4,8: batched generation against sequential "
                        f"(tools/batch_bench.py); {sized}--weights (default q8_0,f32)")
    parser.add_argument("--profile", action="store_true",
                        help=f"where one request's time goes, stage by stage (tools/profile_bench.py); "
                        f"{sized}--weights (default f32,q8_0); with --batch N: of N requests as one batch")


def given(argv: list[str], flag: str) -> bool:
    """Whether the command line sets ``flag`` (``--patches 8`` or ``--patches=8``)."""
    return any(a == flag or a.startswith(flag + "=") for a in argv)


def size_or(argv: list[str], flag: str, value: int, default: int) -> list[str]:
    """``[flag, value]`` where the command line sets ``flag``, else ``[flag, default]``: the request size of
    --batch / --profile, whose default is longer than the side-by-side runs'."""
    return [flag, str(value if given(argv, flag) else default)]


def thread_counts(value: str) -> list[int]:
    return [int(t) for t in value.split(",") if t.strip()]


# -- the sides, in their own processes -----------------------------------------------------------------
@dataclass
class Worker:
    """A family's worker script, run as ``PYTHON SCRIPT SIDE ARGS...``: ours in the project venv, upstream
    in its reference env ``.ref-envs/<env>`` (tools/reference_envs/<env>.sh builds it); its last stdout
    line is its JSON record."""

    script: Path
    env: str

    @property
    def upstream_python(self) -> Path:
        return REPO / ".ref-envs" / self.env / "bin" / "python"

    @property
    def upstream_fix(self) -> str:
        return f"tools/reference_envs/{self.env}.sh"

    def run(self, side: str, *args: str) -> dict:
        python = OURS_PY if side == "ours" else self.upstream_python
        require(python, "tools/setup_env.sh" if side == "ours" else self.upstream_fix)
        return run_worker_process([str(python), str(self.script), side, *args], side)


def alternate(sides: Mapping[K, Callable[[], dict]], rounds: int, *, swap: bool = False,
              report: Callable[[int, K, dict], None] | None = None) -> dict[K, list[dict]]:
    """``rounds`` rounds of every side in turn (A B C A B C ..., or A B B A ... with ``swap``), so that a
    busy spell of the shared machine falls on every side alike; every side's results in order."""
    runs: dict[K, list[dict]] = {side: [] for side in sides}
    order = list(sides)
    for round_ in range(rounds):
        for side in reversed(order) if swap and round_ % 2 else order:
            runs[side].append(sides[side]())
            if report is not None:
                report(round_, side, runs[side][-1])
    return runs


def alternate_merged(sides: Mapping[str, Callable[[], dict]], rounds: int) -> dict[str, dict]:
    """:func:`alternate`, each side's processes pooled into one record (``bench_common.merge``)."""
    return {side: merge(runs) for side, runs in alternate(sides, rounds).items() if runs}


# -- the table ------------------------------------------------------------------------------------------
def print_sides(title: str, rows: Mapping[str, dict], *, ratios: Iterable[tuple[str, str]] | None = None,
                extra: tuple[str, Callable[[dict], str]] | None = None, first_audio: str = "first audio",
                rss: tuple[str, str] = ("peak RSS gen", "peak_rss_gen_mb"),
                note: Callable[[dict, dict], str] | None = None) -> None:
    """One setting's sides: wall median (min..max over every timed run), RTF, time to first audio (where a
    side streams), peak RSS (``rss``: its header and the record's MB field), load time and the family's
    ``extra`` column; then each ``ratios`` pair (default: every side against the first) as the ratio of
    the medians, wall and first audio, with the family's ``note`` on the pair."""
    print(f"\n== {title}")
    width = max([9, *(len(side) for side in rows)])
    stream = any(r.get("ttfa") for r in rows.values())
    head = f"{'side':{width}s} {'wall median (min..max)':28s} {'RTF':>7s} "
    head += f"{first_audio:28s} " if stream else ""
    print(head + f"{rss[0]:>13s} {'load':>8s}" + (f"  {extra[0]}" if extra else ""))
    for side, r in rows.items():
        rtf = statistics.median(r["walls"]) / r["audio_s"] if r.get("audio_s") else math.nan
        mb = r.get(rss[1])
        line = f"{side:{width}s} {spread(r['walls']):28s} {rtf:7.3f} "
        line += f"{spread(r['ttfa']) if r.get('ttfa') else 'n/a':28s} " if stream else ""
        line += f"{f'{mb / 1024:.2f} GiB' if mb else 'n/a':>13s} {r['load_s']:6.2f} s"
        print(line + (f"  {extra[1](r)}" if extra else ""))
    first = next(iter(rows), None)
    for num, den in ratios if ratios is not None else [(side, first) for side in rows if side != first]:
        if num == den or num not in rows or den not in rows:
            continue
        a, b = rows[num], rows[den]
        line = f"ratio {num}/{den}: wall {ratio(a['walls'], b['walls']):.3f}"
        if a.get("ttfa") and b.get("ttfa"):
            line += f", first audio {ratio(a['ttfa'], b['ttfa']):.3f}"
        print(line + (note(a, b) if note else ""))
    sys.stdout.flush()


# -- the --profile / --batch / --weights modes ------------------------------------------------------------
def run_modes(args: argparse.Namespace, family: str, folder: Path, *, size: list[str],
              long_size: list[str] | None = None, threads: int, weights_threads: int | None = None,
              profile_repeats: int | None = None, session: list[str] | None = None, label: str | None = None,
              weights_alone: bool = True) -> bool:
    """Run the mode the command asks for, if any (False: none): ``--profile`` (tools/profile_bench.py),
    ``--batch`` (tools/batch_bench.py) or ``--weights`` alone (tools/weights_bench.py), on ``folder``
    packaged once per weight type. ``size`` is the request's size in worker flags (``long_size`` with
    --batch / --profile, default ``size``), ``session`` more worker flags of those two (session
    options); ``threads`` theirs (``weights_threads``: the --weights workers')."""
    long_size = [*(size if long_size is None else long_size), *(session or [])]
    if args.profile:
        from tools.profile_bench import Options as ProfileOptions
        from tools.profile_bench import profile_batch
        from tools.profile_bench import run as run_profile

        repeats = args.repeats if profile_repeats is None else profile_repeats
        run_profile(family, folder, ProfileOptions(args.weights or "f32,q8_0", threads, repeats,
                                                   profile_batch(args.batch), long_size), label=label)
    elif args.batch:
        from tools.batch_bench import run as run_batch

        run_batch(family, folder, batch=args.batch, weights=args.weights or "q8_0,f32", threads=threads,
                  worker_args=long_size, label=label)
    elif weights_alone and args.weights:
        from tools.weights_bench import Options as WeightsOptions
        from tools.weights_bench import run as run_weights

        opts = WeightsOptions(args.weights, args.repeats, weights_threads or threads, size,
                              getattr(args, "device", None), getattr(args, "json", None))
        run_weights(family, folder, opts)
    else:
        return False
    return True
