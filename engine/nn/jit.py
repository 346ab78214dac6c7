"""Small C++ kernels compiled on first use, for the CPU paths torch has no kernel for.

:func:`build` compiles a source string with ``torch.utils.cpp_extension.load_inline`` (cached in
torch's extension folder, so only the first process on a machine pays the ~30 s build) and gives
None where that cannot be done: no compiler or ninja, a failed build, or a CPU without the
instruction sets the kernel is compiled for (checked before anything runs: an instruction the CPU
lacks would kill the process). Callers then keep torch's own kernels. A build on a terminal says
so on stderr first, since it holds up the load that asked for it.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from types import ModuleType

import torch


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


def build(name: str, source: str, functions: Sequence[str], *, cpu_flags_needed: Iterable[str],
          cflags: Sequence[str]) -> ModuleType | None:
    """The compiled extension ``name`` exposing ``functions``, or None where it cannot be built or
    this CPU lacks any of ``cpu_flags_needed``. Bump ``name`` when ``source`` changes."""
    if not cpu_has(cpu_flags_needed):
        return None
    try:
        from torch.utils.cpp_extension import load_inline

        if not built(name) and sys.stderr.isatty():  # a terminal: say why this load takes longer
            print(f"audiocpp: building the {name} kernel for this machine (once; up to a minute)",
                  file=sys.stderr, flush=True)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return load_inline(name=name, cpp_sources=[source], functions=list(functions),
                               extra_cflags=["-O3", *cflags, "-fopenmp"], extra_ldflags=["-fopenmp"], verbose=False)
    except Exception:  # no compiler, no ninja, a failed build: keep torch's kernels
        return None


def built(name: str) -> bool:
    """Whether torch's extension folder already holds a build of ``name`` (False when unknown)."""
    try:
        from torch.utils.cpp_extension import _get_build_directory

        folder = Path(_get_build_directory(name, verbose=False))
        return any(folder.glob(f"{name}*.so")) or any(folder.glob(f"{name}*.pyd"))
    except Exception:
        return False


def torch_has_avx512() -> bool:
    return "AVX512" in torch.backends.cpu.get_cpu_capability()
