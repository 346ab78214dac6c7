"""``audiocpp batch``'s job, from manifest check to summary (its flags: cli/batch_cmd.py).

The job checks the whole manifest, skips what an earlier run finished, runs the rest
on local worker processes or on Ray, and prints a summary (key=value lines on stdout).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audiocpp.engine.errors import AudiocppError, UsageError

from .manifest import FORMAT_EXT, Defaults, Item, read_manifest
from .output import OutputDir
from .progress import BatchProgress
from .synth import Done, JobSpec


@dataclass
class BatchArgs:
    manifest: Path
    out_dir: Path | None = None
    family: str | None = None
    model: str | None = None
    revision: str | None = None
    cache_dir: Path | None = None
    codec: Path | None = None
    device: str | None = None  # load option 'device'
    defaults: Defaults = field(default_factory=Defaults)
    request_options: list[str] = field(default_factory=list)
    session_options: list[str] = field(default_factory=list)
    load_options: list[str] = field(default_factory=list)
    workers: int = 1
    threads: int | None = None
    overwrite: bool = False
    check: bool = False
    progress: bool | None = None
    ray: bool = False
    ray_address: str | None = None
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    batch_size: int | None = None  # default: per family and device (FamilyPlugin.max_batch)
    timeout: float | None = None  # seconds each item may take (its job's deadline)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _check_flags(args: BatchArgs) -> None:
    from audiocpp.engine.audio.io import WRITE_FORMATS

    if args.workers < 1:
        raise UsageError(f"--workers {args.workers} must be at least 1")
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads {args.threads} must be at least 1")
    if args.batch_size is not None and args.batch_size < 1:
        raise UsageError(f"--batch-size {args.batch_size} must be at least 1")
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout {args.timeout:g} must be more than 0 seconds")
    if args.num_cpus <= 0 or args.num_gpus < 0:
        raise UsageError("--num-cpus must be above 0 and --num-gpus at least 0")
    if args.defaults.fmt is not None and args.defaults.fmt not in WRITE_FORMATS:
        raise UsageError(f"--format {args.defaults.fmt!r} is not supported",
                         hint=f"use one of: {', '.join(FORMAT_EXT)}")
    if args.out_dir is None and not args.check:
        raise UsageError("no output folder",
                         hint="pass --out-dir DIR (or --check to only check the manifest)")
    if args.defaults.voice_ref is not None and not args.defaults.voice_ref.is_file():
        raise UsageError(f"--voice-ref {str(args.defaults.voice_ref)!r} does not exist")
    if args.defaults.voice_prompt is not None and not args.defaults.voice_prompt.is_file():
        raise UsageError(f"--voice-prompt {str(args.defaults.voice_prompt)!r} does not exist")


def _check_option_flags(args: BatchArgs, spec: Any) -> None:
    """--voice and --speed: options of the family, not given twice (with --request-option)."""
    for name in ("voice", "speed"):
        value = getattr(args.defaults, name)
        if value is None:
            continue
        if spec.option("request", name) is None:
            if name == "voice":
                raise UsageError(f"{spec.family} has no named voices, so --voice has nothing to choose",
                                 hint="a saved voice prompt is --voice-prompt FILE; `audiocpp voices` lists "
                                 "the named voices of the models that have them (kokoro)")
            raise UsageError(f"{spec.family} has no request option {name!r} (--{name})",
                             hint=f"`audiocpp options --family {spec.family}` lists its options")
        given = args.defaults.options.get(name)
        if given is not None and str(given).lower() != str(value).lower():
            raise UsageError(f"option {name!r} is given twice with different values ({given!r} and "
                             f"{value!r})", hint=f"drop --request-option {name}=...")


def run_batch(args: BatchArgs) -> None:
    """The whole job; raises AudiocppError for bad input and when items failed (exit 1)."""
    from audiocpp.engine.loader import ModelRef, plan_load
    from audiocpp.engine.spec.options import parse_key_values, resolve_options

    clock = time.perf_counter()
    _check_flags(args)
    if args.ray or args.ray_address:  # before the (long) checks: a missing extra is said at once
        from .ray_runner import import_ray

        import_ray()
    load_options = parse_key_values(args.load_options, flag="--load-option")
    session_options = parse_key_values(args.session_options, flag="--session-option")
    args.defaults.options = parse_key_values(args.request_options, flag="--request-option")
    if args.codec is not None:
        load_options["codec"] = str(args.codec)
    if args.device is not None:
        load_options["device"] = args.device
    # The loader's plan, as for `audiocpp` (a name downloaded once); the workers load what it planned.
    plan = plan_load(ModelRef(args.model, args.family, args.revision, args.cache_dir, args.progress),
                     load_options)
    resolve_options(plan.spec, "session", session_options, fill_defaults=False)
    _check_option_flags(args, plan.spec)
    items = read_manifest(args.manifest, plan.spec, args.defaults)
    if args.check:
        _report_check(items, args)
        return
    assert args.out_dir is not None
    out = OutputDir(args.out_dir)
    todo = items if args.overwrite else [item for item in items if not out.finished(item)]
    out.tally.skipped = len(items) - len(todo)
    out.remove_stale_temporaries(todo)
    if plan.note:
        print(f"note: {plan.note}", file=sys.stderr)
    on_ray = args.ray or bool(args.ray_address)
    workers = min(args.workers, max(len(todo), 1))
    # One local worker keeps torch's default, as `audiocpp` does: float sums (so the audio, slightly)
    # depend on the thread count, and a seeded item then equals the CLI's audio exactly.
    threads = args.threads or (max(1, int(args.num_cpus)) if on_ray else
                               (None if workers == 1 else max(1, _cores() // workers)))
    if args.batch_size is None:
        from audiocpp.engine.device import DEVICE_OPTION, resolve_device
        from audiocpp.engine.registry import get_family

        device = resolve_device((load_options or {}).get(DEVICE_OPTION)).type
        args.batch_size = get_family(plan.family).default_max_batch(device)
    job = JobSpec(family=plan.family, model_path=str(plan.path.resolve()), load_options=load_options,
                  session_options=session_options, threads=threads, batch_size=args.batch_size,
                  timeout_s=args.timeout)
    where = ((f"Ray at {args.ray_address}" if args.ray_address else "a local Ray instance") if on_ray
             else "local")
    print(f"batch: {len(items)} item{'s' if len(items) > 1 else ''}, {out.tally.skipped} already done, "
          f"{len(todo)} to run on {where} "
          f"({workers} worker{'s' if workers > 1 else ''}, {threads or 'default'} torch threads "
          f"and batches of up to {args.batch_size} each)",
          file=sys.stderr)
    bar = BatchProgress(len(todo), enabled=args.progress)
    prepared: dict[str, int] = {}
    ready_at: list[float] = []
    rows_per_step: list[float] = []

    def record(item: Item, done: Done) -> None:
        kept = out.record(item, done.row, done.audio, done.words)
        prepared[done.worker] = max(prepared.get(done.worker, 0), done.voices_prepared)
        if done.audio is not None:
            rows_per_step.append(done.batch_rows)
        if done.warnings:
            bar.close()
            for message in done.warnings:
                print(f"warning: {item.id}: {message}", file=sys.stderr)
        bar.advance(kept["status"] == "ok")

    def on_ready() -> None:
        if not ready_at:
            ready_at.append(time.perf_counter())
        bar.start()

    stop: KeyboardInterrupt | SystemExit | None = None
    try:
        if todo and on_ray:
            from .ray_runner import run_ray

            run_ray(job, todo, record, on_ready, address=args.ray_address, workers=workers,
                    num_cpus=args.num_cpus, num_gpus=args.num_gpus, batch_size=args.batch_size)
        elif todo:
            from .local import LocalPool

            LocalPool(job, workers).run(todo, record, on_ready)
    except (KeyboardInterrupt, SystemExit) as error:  # Ctrl-C, or SIGTERM (cli/main.py's Terminated)
        if isinstance(error, SystemExit) and type(error).__name__ != "Terminated":
            raise
        stop = error
    bar.close()
    out.compact(items)
    _summary(out, items, clock, ready_at, prepared, rows_per_step)
    if stop is not None:
        word, status = (("interrupted", 130) if isinstance(stop, KeyboardInterrupt)
                        else ("terminated", stop.code))
        print(f"batch {word}: {out.tally.done + out.tally.failed} items finished in this run; "
              "rerun the same command to resume", file=sys.stderr)
        raise SystemExit(status)
    if out.tally.failed:
        for item_id, error in out.tally.failures[:10]:
            print(f"failed: {item_id}: {error}", file=sys.stderr)
        raise AudiocppError(
            f"{out.tally.failed} of {len(items)} items failed; the others are done",
            hint=f"each error is in {out.path}; fix the items and rerun the same command to redo only those",
        )


def _report_check(items: list[Item], args: BatchArgs) -> None:
    voices = {item.voice_key for item in items if any(item.voice_key)}
    print(f"manifest ok: {len(items)} items, {len(voices)} distinct voices")
    if args.out_dir is not None and args.out_dir.is_dir():
        out = OutputDir(args.out_dir)
        done = sum(1 for item in items if out.finished(item))
        print(f"already done in {args.out_dir}: {done} "
              f"(a run would skip them{'' if not args.overwrite else ', but --overwrite redoes them'})")


def _summary(out: OutputDir, items: list[Item], clock: float, ready_at: list[float], prepared: dict[str, int],
             rows_per_step: list[float]) -> None:
    elapsed = time.perf_counter() - clock
    tally = out.tally
    finished = tally.done + tally.failed
    lines = {
        "items": len(items),
        "done": tally.done,
        "skipped": tally.skipped,
        "failed": tally.failed,
        "audio_h": f"{tally.audio_s / 3600:.4f}",
        "audio_s": f"{tally.audio_s:.2f}",
        "elapsed_s": f"{elapsed:.2f}",
        "load_s": f"{ready_at[0] - clock:.2f}" if ready_at else "",
        "items_per_s": f"{finished / elapsed:.3f}" if elapsed > 0 and finished else "",
        "rtf": f"{elapsed / tally.audio_s:.3f}" if tally.audio_s > 0 else "",
        "voices_prepared": sum(prepared.values()),
        "batch_rows": f"{sum(rows_per_step) / len(rows_per_step):.2f}" if rows_per_step else "",
        "manifest": out.path,
    }
    for key, value in lines.items():
        if value != "":  # nothing was loaded or made (a resumed run with every item done): no figure
            print(f"{key}={value}")
    sys.stdout.flush()
