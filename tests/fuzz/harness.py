"""The promises every fuzz target checks, the budgets, and the per-target counts.

``check(target, call, files=...)`` runs one input through ``call`` and fails the test when

- anything but an ``AudiocppError`` escapes (a ``MemoryError`` included: see the memory cap),
- the call runs longer than :data:`CALL_LIMIT_S` (a ``SIGALRM`` timer interrupts Python code;
  time spent in C is caught when it returns, and a last-resort ``faulthandler`` dump names
  the place of a real hang),
- the address space grows by more than :data:`MEMORY_HEADROOM` during the call: the soft
  ``RLIMIT_AS`` is lowered to the current size plus the headroom, so an allocation sized by
  an untrusted number fails right there instead of being overcommitted and never touched,
- one of ``files`` (the input under test) changed (size, mtime or content),
- an ``AudiocppError`` has an empty message.

Budgets: ``AUDIOCPP_FUZZ=ci`` (the default) runs each target's :data:`CI_EXAMPLES` inputs
(about 2-3 minutes for all targets on one core); ``AUDIOCPP_FUZZ=long`` multiplies them by
``AUDIOCPP_FUZZ_SCALE`` (default 10: about 1.3 x 10^5 inputs in all) for release checks; see
docs/fuzzing.md. The counts of every run are printed at the end of the session and, when
``AUDIOCPP_FUZZ_REPORT`` names a file, written there as JSON.
"""

from __future__ import annotations

import contextlib
import faulthandler
import hashlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from audiocpp.engine.errors import AudiocppError

REPO = Path(__file__).resolve().parents[2]
PROFILE = os.environ.get("AUDIOCPP_FUZZ", "ci")
SCALE = int(os.environ.get("AUDIOCPP_FUZZ_SCALE", "10")) if PROFILE == "long" else 1
#: a call slower than this is a hang (a backstop: the report gives the slowest call of each target)
CALL_LIMIT_S = float(os.environ.get("AUDIOCPP_FUZZ_CALL_LIMIT_S", "10"))
#: how much the address space may grow during one call
MEMORY_HEADROOM = int(os.environ.get("AUDIOCPP_FUZZ_HEADROOM_MB", "768")) << 20

#: inputs per target in CI (sized so that all targets take about 2-3 minutes on one core)
CI_EXAMPLES: dict[str, int] = {
    "gguf_bytes": 600, "gguf_struct": 800, "package_bytes": 500, "package_keys": 700,
    "safetensors_bytes": 500, "safetensors_header": 700, "torch_bytes": 300, "torch_pickle": 150,
    "audio_bytes": 600, "audio_header": 500, "spec_json": 150, "options": 600, "text_chunk": 300,
    "text_big": 2, "tokenizer_gguf": 300, "tokenizer_text": 300, "voice_prompt": 250,
    "manifest": 200, "srt": 500, "cli": 80, "upload": 200,
    # the server's auth surface (test_fuzz_auth.py): requests to a running server, a few ms each
    "auth_header": 300, "auth_query": 200, "auth_names": 150,
}
#: targets whose inputs take seconds each: the long profile scales them by at most this much
SLOW_SCALE_CAP = {"text_big": 3}


def fuzz_settings(target: str) -> settings:
    """Hypothesis settings for ``target``: its budget, no deadline (the harness times calls),
    the example database under .pytest_cache (git-ignored)."""
    return settings(
        max_examples=CI_EXAMPLES[target] * min(SCALE, SLOW_SCALE_CAP.get(target, SCALE)),
        deadline=None,
        derandomize=False,
        print_blob=True,
        database=DirectoryBasedExampleDatabase(str(REPO / ".pytest_cache" / "hypothesis")),
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                               HealthCheck.function_scoped_fixture, HealthCheck.large_base_example],
    )


@dataclass
class Counts:
    inputs: int = 0
    refused: int = 0  # AudiocppError: a clear refusal
    accepted: int = 0
    slowest_s: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)


COUNTS: dict[str, Counts] = {}


class Hang(BaseException):
    """Raised by the timer in the middle of a call that ran past the limit (a BaseException,
    so that no ``except Exception`` in the code under test swallows it)."""


class Broken(AssertionError):
    """A promise was broken; the message says which."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def alarm(signum: int, frame: Any) -> None:
        raise Hang()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    faulthandler.dump_traceback_later(max(60.0, seconds * 6), exit=True)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        faulthandler.cancel_dump_traceback_later()
        signal.signal(signal.SIGALRM, previous)


def _address_space() -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


@contextlib.contextmanager
def memory_cap(headroom: int = MEMORY_HEADROOM) -> Iterator[None]:
    """Lower the soft RLIMIT_AS to the current size + ``headroom`` (Linux; elsewhere a no-op)."""
    try:
        import resource
    except ImportError:
        yield
        return
    size = _address_space()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if size is None:
        yield
        return
    cap = size + headroom
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def fingerprint(path: Path) -> tuple[int, int, str] | None:
    try:
        stat = path.stat()
        if path.is_dir():
            return (0, stat.st_mtime_ns, "dir")
        return (stat.st_size, stat.st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
    except FileNotFoundError:
        return None


def check(target: str, call: Callable[[], Any], *, files: Sequence[Path] = (),
          limit_s: float = CALL_LIMIT_S, allowed: tuple[type[BaseException], ...] = ()) -> Any:
    """Run ``call`` under the invariants; returns its result, or the AudiocppError it raised.
    ``allowed``: other exception types the caller documents (e.g. ValueError for a bad argument)."""
    counts = COUNTS.setdefault(target, Counts())
    counts.inputs += 1
    before = [fingerprint(p) for p in files]
    start = time.perf_counter()
    outcome: Any = None
    try:
        with time_limit(limit_s), memory_cap():
            outcome = call()
        counts.accepted += 1
    except AudiocppError as error:
        counts.refused += 1
        kind = type(error).__name__
        counts.errors[kind] = counts.errors.get(kind, 0) + 1
        if not error.message.strip():
            raise Broken(f"{target}: {kind} with an empty message") from error
        outcome = error
    except Hang:
        raise Broken(f"{target}: the call ran past {limit_s:g} s (a hang)") from None
    except KeyboardInterrupt:
        raise
    except allowed as error:
        counts.refused += 1
        outcome = error
    except BaseException as error:
        what = "an allocation hit the memory cap" if isinstance(error, MemoryError) else "escaped"
        raise Broken(f"{target}: {type(error).__name__} {what}: {str(error)[:300]}") from error
    finally:
        elapsed = time.perf_counter() - start
        counts.slowest_s = max(counts.slowest_s, elapsed)
    if elapsed > limit_s:
        raise Broken(f"{target}: the call took {elapsed:.1f} s (limit {limit_s:g} s)")
    after = [fingerprint(p) for p in files]
    for path, old, new in zip(files, before, after):
        if old != new:
            raise Broken(f"{target}: the input {path} was modified")
    return outcome


def summary() -> str:
    if not COUNTS:
        return ""
    lines = [f"fuzz ({PROFILE}, scale {SCALE}): {sum(c.inputs for c in COUNTS.values())} inputs"]
    for name, c in sorted(COUNTS.items()):
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(c.errors.items()))
        lines.append(f"  {name:20s} {c.inputs:7d} inputs  {c.accepted:6d} accepted  {c.refused:6d} refused"
                     f"  slowest {c.slowest_s:6.2f} s  {kinds}")
    return "\n".join(lines)


def write_report() -> None:
    target = os.environ.get("AUDIOCPP_FUZZ_REPORT")
    if target and COUNTS:
        data = {"profile": PROFILE, "scale": SCALE, "python": sys.version.split()[0],
                "targets": {k: vars(v) for k, v in sorted(COUNTS.items())}}
        Path(target).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
