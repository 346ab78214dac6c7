"""Small C++ kernels compiled on first use, for the CPU paths torch has no kernel for.

A kernel is a :class:`Kernel`: a C++ file in ``engine/nn/kernels/`` (shipped as package data), the
functions it binds, and one table of the instruction sets it is compiled for (each CPU flag as
``/proc/cpuinfo`` names it, with the compiler's ``-m`` flag that enables it). :func:`build` compiles
it with ``torch.utils.cpp_extension.load_inline`` under a name derived from a hash of the source
text, the compiler flags and torch's version (so a changed kernel, flag or torch never loads a
stale build), cached in torch's extension folder: only the first process on a machine pays the
~30 s build (``audiocpp.engine.nn.kernels.build_all`` pays it at set-up).

:func:`build` gives None where that cannot be done: the kernel's switch is ``0``, the CPU lacks
one of its instruction sets (checked before anything runs: an instruction the CPU lacks would kill
the process), or the build fails (no compiler or ninja, a compiler error, a library that does not
load). Callers then keep torch's own kernels. Only such failures are caught; anything else (a bug,
a test's stub) propagates. Why a kernel is not there is kept (:func:`why_not`) and, under
``AUDIOCPP_DEBUG=1``, printed on stderr with the tail of the compiler's output. A build on a
terminal says so on stderr first, since it holds up the load that asked for it; the seconds spent
building are counted for the process (:func:`build_seconds`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType

import torch

#: Where the kernels' C++ files are (``audiocpp.engine.nn.kernels``, package data).
KERNELS_DIR = Path(__file__).with_name("kernels")
#: What a failed build raises: torch's build errors (RuntimeError: no ninja, the compiler's
#: error), a compiler or file that cannot be run or read (OSError), a build that does not load
#: (ImportError), a tool that fails (SubprocessError).
BUILD_FAILURES = (RuntimeError, OSError, ImportError, subprocess.SubprocessError)
#: Lines of the compiler's output printed under ``AUDIOCPP_DEBUG=1``.
_TAIL_LINES = 40


@dataclass(frozen=True)
class Kernel:
    """A C++ kernel: ``source`` (a file in :data:`KERNELS_DIR`) binding ``functions``, compiled
    for ``isa``: pairs of (the CPU flag as ``/proc/cpuinfo`` names it, the compiler flag), the one
    table of the instruction sets it needs. ``switch``: the environment variable that turns it off
    with ``0``; ``torch_avx512``: also requires torch's own kernels to run AVX-512 (a process held
    to a lower ``ATEN_CPU_CAPABILITY`` keeps torch's kernels); ``options``: further compiler flags
    (``-ffp-contract=off`` where the kernel must round as torch's separate passes do)."""

    name: str
    source: str
    functions: tuple[str, ...]
    isa: tuple[tuple[str, str], ...]
    switch: str | None = None
    torch_avx512: bool = False
    options: tuple[str, ...] = ()

    @property
    def cpu_flags(self) -> tuple[str, ...]:
        return tuple(flag for flag, _ in self.isa)

    @property
    def cflags(self) -> list[str]:
        return ["-O3", *(option for _, option in self.isa), *self.options, "-fopenmp"]

    @property
    def ldflags(self) -> list[str]:
        return ["-fopenmp"]

    def path(self) -> Path:
        return KERNELS_DIR / self.source

    def text(self) -> str:
        return self.path().read_text(encoding="utf-8")

    def build_name(self) -> str:
        """``audiocpp_<name>_<hash>``: the hash of the source text, the functions bound, the
        compiler and linker flags and torch's version."""
        digest = hashlib.sha256()
        for part in (self.text(), *self.functions, *self.cflags, *self.ldflags, torch.__version__):
            digest.update(part.encode())
            digest.update(b"\0")
        return f"audiocpp_{self.name}_{digest.hexdigest()[:16]}"

    def unsupported(self) -> str | None:
        """Why this CPU (or this torch) cannot run the kernel, or None when it can."""
        missing = [flag for flag in self.cpu_flags if flag not in cpu_flags()]
        if missing:
            return f"this CPU lacks {', '.join(missing)}"
        if self.torch_avx512 and not torch_has_avx512():
            return f"torch's CPU kernels do not run AVX-512 here ({torch.backends.cpu.get_cpu_capability()})"
        return None

    def off(self) -> bool:
        """Whether the kernel's switch is set to ``0``."""
        return self.switch is not None and disabled(self.switch)


@cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux names them (``avx512_vnni``, ...); empty elsewhere."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def cpu_has(flags: Iterable[str]) -> bool:
    return set(flags) <= cpu_flags()


def disabled(env: str) -> bool:
    """Whether ``$env`` is set to ``0`` (the switch each kernel documents)."""
    return os.environ.get(env, "1") == "0"


def toolchain_missing() -> str | None:
    """What a build here lacks (no C++ compiler, no ninja), or None when both are found."""
    import shutil

    from torch.utils.cpp_extension import get_cxx_compiler, is_ninja_available

    compiler = get_cxx_compiler()
    if shutil.which(compiler) is None:
        return f"no C++ compiler ({compiler}; set CXX)"
    if not is_ninja_available():
        return "no ninja (pip install ninja)"
    return None


def debugging() -> bool:
    """Whether ``AUDIOCPP_DEBUG`` is set (to anything but ``0``)."""
    return os.environ.get("AUDIOCPP_DEBUG", "") not in ("", "0")


#: Set by :func:`verbose`: builds in this context announce themselves and say why they failed.
_verbose: ContextVar[bool] = ContextVar("audiocpp_jit_verbose", default=False)


@contextlib.contextmanager
def verbose(on: bool = True) -> Iterator[None]:
    """Within this context (``on``), builds announce themselves on stderr and failures are said
    there with the tail of the compiler's output, terminal or not (what ``AUDIOCPP_DEBUG=1`` does
    for the failures)."""
    token = _verbose.set(on or _verbose.get())
    try:
        yield
    finally:
        _verbose.reset(token)


_lock = threading.Lock()
_seconds = 0.0
_failures: dict[str, str] = {}


def build_seconds() -> float:
    """Seconds this process has spent in :func:`build` compiling kernels (or loading their cached
    builds), so a build inside a request can be told apart from its own time."""
    with _lock:
        return _seconds


def why_not(kernel: Kernel) -> str | None:
    """Why the last :func:`build` (or check, :func:`reject`) of ``kernel`` in this process gave
    no kernel; None when it did or was not tried."""
    with _lock:
        return _failures.get(kernel.name)


def reject(kernel: Kernel, reason: str, detail: str = "", *, verbose: bool = False) -> None:
    """Record that ``kernel`` is not used here and why (a build that failed, or a build whose
    self-check failed); said on stderr under ``AUDIOCPP_DEBUG=1`` or ``verbose``."""
    with _lock:
        _failures[kernel.name] = reason
    if verbose or _verbose.get() or debugging():
        tail = "\n".join(detail.rstrip().splitlines()[-_TAIL_LINES:])
        print(f"audiocpp: the {kernel.name} kernel is not used: {reason}" + (f"\n{tail}" if tail else ""),
              file=sys.stderr, flush=True)


def build(kernel: Kernel, *, verbose: bool = False) -> ModuleType | None:
    """The compiled extension of ``kernel`` exposing its functions, or None where its switch is
    ``0``, this CPU cannot run it or the build fails (:func:`why_not` says which). ``verbose``:
    announce the build and say why it failed on stderr even when that is not a terminal and
    ``AUDIOCPP_DEBUG`` is unset."""
    verbose = verbose or _verbose.get()
    with _lock:
        _failures.pop(kernel.name, None)
    if kernel.off():
        reject(kernel, f"turned off ({kernel.switch}=0)", verbose=verbose)
        return None
    reason = kernel.unsupported()
    if reason is not None:
        reject(kernel, reason, verbose=verbose)
        return None
    global _seconds
    start = time.perf_counter()
    try:
        from torch.utils.cpp_extension import load_inline

        source, name = kernel.text(), kernel.build_name()
        if not built(name):
            missing = toolchain_missing()
            if missing is not None:
                reject(kernel, missing, verbose=verbose)
                return None
            if verbose or sys.stderr.isatty():  # say why this load takes longer
                print(f"audiocpp: building the {kernel.name} kernel for this machine (once; up to a minute)",
                      file=sys.stderr, flush=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return load_inline(name=name, cpp_sources=[source], functions=list(kernel.functions),
                               extra_cflags=kernel.cflags, extra_ldflags=kernel.ldflags, verbose=False)
    except BUILD_FAILURES as exc:  # no compiler, no ninja, a failed build: keep torch's kernels
        message = str(exc)
        reason = f"the build failed: {type(exc).__name__}: {_summary(message)}"
        reject(kernel, reason, message, verbose=verbose)
        return None
    finally:
        with _lock:
            _seconds += time.perf_counter() - start


def _summary(message: str, width: int = 160) -> str:
    """One line of a build error: its first line (torch's "Error building extension ...", cut to
    ``width``) and the compiler's first ``error:`` line."""
    lines = message.splitlines() or [""]
    first = lines[0] if len(lines[0]) <= width else lines[0][:width] + " ..."
    errors = [line.strip() for line in lines[1:] if "error:" in line]
    return f"{first} [{errors[0][:width]}]" if errors else first


def built(name: Kernel | str) -> bool:
    """Whether torch's extension folder already holds a build of ``name`` (a kernel, or a build
    name; False when unknown)."""
    try:
        from torch.utils.cpp_extension import _get_build_directory

        if isinstance(name, Kernel):
            name = name.build_name()
        folder = Path(_get_build_directory(name, verbose=False))
        return any(folder.glob(f"{name}*.so")) or any(folder.glob(f"{name}*.pyd"))
    except Exception:
        return False


def torch_has_avx512() -> bool:
    return "AVX512" in torch.backends.cpu.get_cpu_capability()
