"""Small C++ kernels compiled on first use, for the CPU paths torch has no kernel for.

A kernel is a :class:`Kernel`: a C++ file in ``engine/nn/kernels/`` (shipped as package data), the
functions it binds, and its :class:`Variant` s: the same source compiled for each ISA level it is
written for (``engine.nn.kernels.cpu_isa``: AVX-512, AVX-VNNI, AVX2, NEON, and the portable ``generic``),
each with one table of the instruction sets it needs (each CPU flag as ``/proc/cpuinfo`` names it,
with the compiler flag that enables it). A process runs the best variant its CPU has and
``AUDIOCPP_CPU_ISA`` allows (:meth:`Kernel.select`), chosen once, as ggml-cpu chooses its
backends. :func:`build` compiles a variant with ``torch.utils.cpp_extension.load_inline`` under a
name derived from a hash of the source text, the shared header, the compiler flags and torch's
version (so a changed kernel, flag or torch never loads a stale build), cached in torch's extension
folder: only the first process on a machine pays the ~20 s build (``audiocpp kernels`` pays it at
set-up).

:func:`build` gives None where that cannot be done: the kernel's switch is ``0``, the CPU can run
none of its variants (checked before anything runs: an instruction the CPU lacks would kill the
process), or the build fails (no compiler or ninja, a compiler error, a library that does not
load). Callers then keep torch's own kernels. Only such failures are caught; anything else (a bug,
a test's stub) propagates. Why a kernel is not there is kept (:func:`why_not`) and, under
``AUDIOCPP_DEBUG=1``, printed on stderr with the tail of the compiler's output. A build on a
terminal says so on stderr first, since it holds up the load that asked for it; the seconds spent
building are counted for the process (:func:`build_seconds`).

A kernel another process is building is not waited for: :func:`build` gives None for it (the caller
keeps torch's path, for the rest of this process) while the set-up's background build of every kernel
runs (``tools/setup_env.sh`` holds :func:`background_lock` with ``flock`` for that build's whole life,
so a killed build leaves no lock behind) or while another process compiles that kernel (torch's lock
file in its build folder). Either way the numbers are those of the path taken: the kernels either give
torch's bits or are documented-drift options (docs/numerics.md). ``AUDIOCPP_KERNEL_WAIT=1`` waits
instead (the set-up's own builds, ``bin/test``). A torch lock file older than
:data:`STALE_LOCK_SECONDS` is a killed build's: it is removed rather than waited on for ever.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch

from . import cpu_isa

#: Where the kernels' C++ files are (``audiocpp.engine.nn.kernels``, package data).
KERNELS_DIR = Path(__file__).parent
#: What a failed build raises: torch's build errors (RuntimeError: no ninja, the compiler's
#: error), a compiler or file that cannot be run or read (OSError), a build that does not load
#: (ImportError), a tool that fails (SubprocessError).
BUILD_FAILURES = (RuntimeError, OSError, ImportError, subprocess.SubprocessError)
#: Lines of the compiler's output printed under ``AUDIOCPP_DEBUG=1``.
_TAIL_LINES = 40
#: ``AUDIOCPP_KERNEL_WAIT=1``: wait for a kernel another process is building (and build it here when
#: nobody is) instead of keeping torch's path for this process: the set-up's builds and ``bin/test`` set it.
WAIT_ENV = "AUDIOCPP_KERNEL_WAIT"
#: A torch build lock (``<build folder>/lock``) untouched this long belongs to a build that was killed.
STALE_LOCK_SECONDS = 15 * 60


@dataclass(frozen=True)
class Variant:
    """One compilation of a kernel's source: its ISA ``level`` (``engine.nn.kernels.cpu_isa``) and ``isa``,
    pairs of (the CPU flag as ``/proc/cpuinfo`` names it, the compiler flag), the one table of the
    instruction sets it needs; ``options``: further compiler flags of this level."""

    level: str
    isa: tuple[tuple[str, str], ...] = ()
    options: tuple[str, ...] = ()

    @property
    def cpu_flags(self) -> tuple[str, ...]:
        return tuple(flag for flag, _ in self.isa)

    def missing(self) -> list[str]:
        """The CPU flags this variant needs that this CPU lacks."""
        return [flag for flag in self.cpu_flags if flag not in cpu_isa.cpu_flags()]


_X86 = (("avx2", "-mavx2"), ("fma", "-mfma"), ("f16c", "-mf16c"))
#: The variants the kernels are compiled as, by level (each kernel lists those it has, best first).
AVX512_VNNI = Variant("avx512", (*_X86, ("avx512f", "-mavx512f"), ("avx512bw", "-mavx512bw"),
                                 ("avx512vl", "-mavx512vl"), ("avx512_vnni", "-mavx512vnni")))
AVX512 = Variant("avx512", (*_X86, ("avx512f", "-mavx512f"), ("avx512bw", "-mavx512bw"),
                            ("avx512vl", "-mavx512vl")))
AVX_VNNI = Variant("avx_vnni", (*_X86, ("avx_vnni", "-mavxvnni")))
AVX2 = Variant("avx2", _X86)
NEON_DOTPROD = Variant("neon_dotprod", (("asimd", "-march=armv8.2-a+dotprod"), ("asimddp", "")))
NEON = Variant("neon", (("asimd", ""),))
#: The portable C++ of every kernel, no intrinsics: the reference the others are tested against.
GENERIC = Variant("generic", (), ("-DAUDIOCPP_GENERIC",))
#: Every level a vector kernel is written for, best first.
ALL_LEVELS = (AVX512_VNNI, AVX_VNNI, AVX2, NEON_DOTPROD, NEON, GENERIC)


@dataclass(frozen=True)
class Kernel:
    """A C++ kernel: ``source`` (a file in :data:`KERNELS_DIR`, which may include ``isa.h``) binding
    ``functions``, compiled as each of ``variants`` (best first; :meth:`select` picks the one a
    process runs). ``switch``: the environment variable that turns it off with ``0``; ``options``:
    further compiler flags of every variant."""

    name: str
    source: str
    functions: tuple[str, ...]
    variants: tuple[Variant, ...] = (GENERIC,)
    switch: str | None = None
    options: tuple[str, ...] = ()
    includes: tuple[str, ...] = ()

    def variant(self, level: str) -> Variant | None:
        """The variant a CPU of ``level`` runs: the best one at or below it that this CPU has (a
        kernel without an ``avx_vnni`` variant runs its ``avx2`` one there); None where none is."""
        order = cpu_isa.rank(level)
        for variant in self.variants:
            if 0 <= cpu_isa.rank(variant.level) <= order and not variant.missing():
                return variant
        return None

    def cflags(self, variant: Variant) -> list[str]:
        isa = [option for _, option in variant.isa if option]
        return ["-O3", "-ffp-contract=off", *isa, *variant.options, *self.options, "-DAUDIOCPP_TORCH",
                "-fopenmp"]

    @property
    def ldflags(self) -> list[str]:
        return ["-fopenmp"]

    def path(self) -> Path:
        return KERNELS_DIR / self.source

    def text(self) -> str:
        return self.path().read_text(encoding="utf-8")

    def build_name(self, variant: Variant | None = None) -> str:
        """``audiocpp_<name>_<level>_<hash>``: the hash of the source text, the shared header and
        the files it includes, the functions bound, the compiler and linker flags and torch's version."""
        variant = variant or self.variants[0]
        digest = hashlib.sha256()
        header = KERNELS_DIR / "isa.h"
        included = ((KERNELS_DIR / name).read_text(encoding="utf-8") for name in self.includes)
        parts = (self.text(), header.read_text(encoding="utf-8") if header.exists() else "", *included,
                 *self.functions, *self.cflags(variant), *self.ldflags, torch.__version__)
        for part in parts:
            digest.update(part.encode())
            digest.update(b"\0")
        return f"audiocpp_{self.name}_{variant.level}_{digest.hexdigest()[:16]}"

    def select(self) -> tuple[Variant | None, str]:
        """The variant this process runs (the best one this CPU has and ``AUDIOCPP_CPU_ISA``
        allows) and why that one: None with the reason where none can run."""
        best = cpu_isa.host_level()
        skipped: list[str] = []
        for variant in self.variants:
            if cpu_isa.rank(variant.level) < 0:
                continue  # another architecture's
            missing = variant.missing()
            if missing:
                skipped.append(f"no {', '.join(missing)}")
                continue
            if not cpu_isa.allowed(variant.level):
                skipped.append(f"{cpu_isa.CAP_ENV}={cpu_isa.cap()}")
                continue
            if len(self.variants) == 1:
                why = "its only variant"
            elif not skipped:
                why = "this CPU's best" if cpu_isa.rank(variant.level) >= cpu_isa.rank(best) else \
                    "the best this kernel has for this CPU"
            else:
                why = f"higher variants skipped: {'; '.join(dict.fromkeys(skipped))}"
            return variant, why
        reasons = "; ".join(dict.fromkeys(skipped)) or f"no variant for {cpu_isa.arch()}"
        return None, f"this CPU cannot run any of its variants ({reasons})"

    def unsupported(self) -> str | None:
        """Why this CPU cannot run the kernel (no variant it can run), or None when it can."""
        variant, why = self.select()
        return None if variant is not None else why

    def off(self) -> bool:
        """Whether the kernel's switch is set to ``0``."""
        return self.switch is not None and disabled(self.switch)


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (``engine.nn.kernels.cpu_isa.cpu_flags``)."""
    return cpu_isa.cpu_flags()


def cpu_has(flags: Iterable[str]) -> bool:
    return cpu_isa.cpu_has(flags)


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


def _key(kernel: Kernel, variant: Variant | None) -> str:
    return kernel.name if variant is None else f"{kernel.name}@{variant.level}"


def why_not(kernel: Kernel, variant: Variant | None = None) -> str | None:
    """Why the last :func:`build` (or check, :func:`reject`) of ``kernel`` (of that ``variant`` when
    it was asked for by name) in this process gave no kernel; None when it did or was not tried."""
    with _lock:
        return _failures.get(_key(kernel, variant))


def reject(kernel: Kernel, reason: str, detail: str = "", *, verbose: bool = False,
           variant: Variant | None = None) -> None:
    """Record that ``kernel`` (a ``variant`` asked for by name) is not used here and why (a build
    that failed, or a build whose self-check failed); said on stderr under ``AUDIOCPP_DEBUG=1`` or
    ``verbose``."""
    with _lock:
        _failures[_key(kernel, variant)] = reason
    if verbose or _verbose.get() or debugging():
        tail = "\n".join(detail.rstrip().splitlines()[-_TAIL_LINES:])
        what = kernel.name if variant is None else f"{kernel.name} ({variant.level})"
        print(f"audiocpp: the {what} kernel is not used: {reason}" + (f"\n{tail}" if tail else ""),
              file=sys.stderr, flush=True)


def waiting() -> bool:
    """Whether this process waits for kernels other processes are building (``AUDIOCPP_KERNEL_WAIT``
    set to anything but ``0``) rather than keeping torch's path."""
    return os.environ.get(WAIT_ENV, "") not in ("", "0")


def background_lock() -> Path:
    """The lock file the set-up's background build of every kernel holds (``flock``) while it runs:
    ``kernels/build.lock`` in audiocpp's cache folder (``$AUDIOCPP_CACHE_DIR`` or ``~/.cache/audiocpp``),
    beside that build's log ``kernels/build.log``."""
    from ...weights.package import cache_dir

    return cache_dir() / "kernels" / "build.lock"


def _held(path: Path) -> bool:
    """Whether some process holds an exclusive ``flock`` on ``path`` (False where it does not exist or
    the platform has no ``flock``)."""
    try:
        import fcntl
    except ImportError:
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # shared: checkers never exclude each other
    except OSError:
        return True
    finally:
        os.close(fd)  # and our shared lock with it
    return False


def _build_lock(name: str) -> Path:
    """torch's lock file for the build ``name`` (``load_inline`` creates it while it compiles)."""
    return _extensions_root() / name / "lock"


def _lock_age(path: Path) -> float | None:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return None


def building_elsewhere(name: str) -> str | None:
    """Why a build of ``name`` (a build name) would wait for another process, or None where none
    would: the set-up's background build holds :func:`background_lock`, or another process is compiling
    ``name`` (torch's lock file, younger than :data:`STALE_LOCK_SECONDS`)."""
    lock = background_lock()
    if _held(lock):
        return f"the set-up is building the kernels in the background (log: {lock.with_name('build.log')})"
    age = _lock_age(_build_lock(name))
    if age is not None and age < STALE_LOCK_SECONDS:
        return f"another process is building it ({_build_lock(name)})"
    return None


def _clear_stale_lock(name: str, verbose: bool) -> None:
    """Remove torch's lock file of ``name`` where it is older than :data:`STALE_LOCK_SECONDS` (a killed
    build's: ``load_inline`` would otherwise wait on it for ever)."""
    lock = _build_lock(name)
    age = _lock_age(lock)
    if age is None or age < STALE_LOCK_SECONDS:
        return
    with contextlib.suppress(FileNotFoundError):
        lock.unlink()
    if verbose or debugging():
        print(f"audiocpp: removed {lock}, a build lock left {age / 60:.0f} minutes ago by a build that "
              "did not finish", file=sys.stderr, flush=True)


_told_busy = False


def _tell_busy(reason: str, verbose: bool) -> None:
    """Say once per process, on a terminal (or ``verbose``), that a kernel is not used yet and why."""
    global _told_busy
    with _lock:
        if _told_busy or not (verbose or sys.stderr.isatty()):
            return
        _told_busy = True
    print(f"audiocpp: a C++ kernel is not ready yet ({reason}); this run keeps torch's own path "
          "(slower; docs/numerics.md says what changes)", file=sys.stderr, flush=True)


def build(kernel: Kernel, *, variant: Variant | None = None, verbose: bool = False) -> ModuleType | None:
    """The compiled extension of ``kernel`` exposing its functions, as the variant this process runs
    (:meth:`Kernel.select`) or as ``variant`` (tests, benchmarks: any variant this CPU can run), or
    None where its switch is ``0``, this CPU cannot run it, the build fails, or another process is
    building it and this one does not wait (:func:`waiting`; :func:`why_not` says which).
    ``verbose``: announce the build and say why it failed on stderr even when that is not a
    terminal and ``AUDIOCPP_DEBUG`` is unset."""
    verbose = verbose or _verbose.get()
    named = variant
    with _lock:
        _failures.pop(_key(kernel, named), None)
    if kernel.off():
        reject(kernel, f"turned off ({kernel.switch}=0)", verbose=verbose, variant=named)
        return None
    if variant is None:
        variant, why = kernel.select()
        if variant is None:
            reject(kernel, why, verbose=verbose)
            return None
    else:
        missing = variant.missing() if cpu_isa.rank(variant.level) >= 0 else [f"{cpu_isa.arch()} code"]
        if missing:
            reject(kernel, f"this CPU lacks {', '.join(missing)}", verbose=verbose, variant=named)
            return None
    global _seconds
    start = time.perf_counter()
    try:
        source, name = kernel.text(), kernel.build_name(variant)
        ready = _import_built(name)
        if ready is not None:
            return ready
        if not waiting():
            busy = building_elsewhere(name)
            if busy is not None:  # not ready yet: torch's path for this process rather than a wait
                reject(kernel, f"not built yet: {busy}", verbose=verbose, variant=named)
                _tell_busy(busy, verbose)
                return None
        _clear_stale_lock(name, verbose)
        from torch.utils.cpp_extension import load_inline

        if not built(name):
            missing_tool = toolchain_missing()
            if missing_tool is not None:
                reject(kernel, missing_tool, verbose=verbose, variant=named)
                return None
            if verbose or sys.stderr.isatty():  # say why this load takes longer
                print(f"audiocpp: building the {kernel.name} kernel ({variant.level}) for this machine "
                      "(once; up to a minute)", file=sys.stderr, flush=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return load_inline(name=name, cpp_sources=[source], functions=list(kernel.functions),
                               extra_cflags=kernel.cflags(variant), extra_ldflags=kernel.ldflags,
                               extra_include_paths=[str(KERNELS_DIR)], verbose=False)
    except BUILD_FAILURES as exc:  # no compiler, no ninja, a failed build: keep torch's kernels
        message = str(exc)
        reason = f"the build failed: {type(exc).__name__}: {_summary(message)}"
        reject(kernel, reason, message, verbose=verbose, variant=named)
        return None
    finally:
        with _lock:
            _seconds += time.perf_counter() - start


def build_checked(kernel: Kernel, problem: Callable[[ModuleType], str | None], *,
                  level: str | None = None) -> ModuleType | None:
    """:func:`build` (the variant this process runs, or the one a CPU of ``level`` runs), then
    ``problem(module)``: the module's self-check against its reference, None when it passes. A
    module with a problem is rejected (:func:`why_not` says it) and None is given instead."""
    variant = None if level is None else kernel.variant(level)
    if level is not None and variant is None:
        return None
    module = build(kernel, variant=variant)
    if module is None:
        return None
    reason = problem(module)
    if reason is not None:
        reject(kernel, reason, variant=variant)
        return None
    return module


def _summary(message: str, width: int = 160) -> str:
    """One line of a build error: its first line (torch's "Error building extension ...", cut to
    ``width``) and the compiler's first ``error:`` line."""
    lines = message.splitlines() or [""]
    first = lines[0] if len(lines[0]) <= width else lines[0][:width] + " ..."
    errors = [line.strip() for line in lines[1:] if "error:" in line]
    return f"{first} [{errors[0][:width]}]" if errors else first


def _extensions_root() -> Path:
    """torch's extension folder (``torch.utils.cpp_extension._get_build_directory``'s root)."""
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if root is not None:
        return Path(root)
    if torch.version.hip is not None:
        accelerator = f"rocm{torch.version.hip.replace('.', '')}"
    elif torch.version.cuda is not None:
        accelerator = f"cu{torch.version.cuda.replace('.', '')}"
    else:
        accelerator = "cpu"
    python = f"py{sys.version_info.major}{sys.version_info.minor}{getattr(sys, 'abiflags', '')}"
    from torch import _appdirs

    base = os.path.realpath(_appdirs.user_cache_dir(appname="torch_extensions"))
    return Path(base) / f"{python}_{accelerator}"


def _import_built(name: str) -> ModuleType | None:
    """The extension ``name`` imported straight from torch's extension folder where a build of it
    is there (importing ``torch.utils.cpp_extension`` and the setuptools it pulls in costs every
    process 0.06 s); None otherwise, or where it does not import (a build another process is still
    linking): :func:`build` then builds it, waits for it or keeps torch's path (:func:`waiting`)."""
    if name in sys.modules:
        return sys.modules[name]
    try:
        path = _extensions_root() / name / f"{name}.so"
        if not path.is_file():
            return None
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            return None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except (ImportError, OSError, AttributeError):
        return None
    sys.modules[name] = module
    return module


def built(name: Kernel | str) -> bool:
    """Whether torch's extension folder already holds a build of ``name`` (a kernel, or a build
    name; False when unknown)."""
    try:
        from torch.utils.cpp_extension import _get_build_directory

        if isinstance(name, Kernel):
            variant, _ = name.select()
            name = name.build_name(variant)
        folder = Path(_get_build_directory(name, verbose=False))
        return any(folder.glob(f"{name}*.so")) or any(folder.glob(f"{name}*.pyd"))
    except Exception:
        return False
