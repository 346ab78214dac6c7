"""The C++ kernels of ``engine.nn``, one ``.cpp`` file each in this folder (package data), and
:func:`build_all`, which builds every kernel this CPU supports so that set-up pays the compile
instead of the first synthesis.

Each kernel is declared beside the Python that uses it (its ``KERNEL``, an ``engine.nn.jit.Kernel``:
the file, the functions bound, the one table of instruction sets) and loaded by that module's
``kernel()`` (the build, then a check of the built kernel against a reference):

- ``q8_0_linear.cpp``: Q8_0 / Q4_0 blocks times int8 rows per block (``engine.nn.q8_0_linear``;
  AVX512-VNNI; ``AUDIOCPP_Q8_0_KERNEL=0`` turns it off);
- ``bf16_linear.cpp``: float32 math over bfloat16-held weights (``engine.nn.bf16_linear``; AVX-512;
  ``AUDIOCPP_BF16_LINEAR=0``);
- ``snake.cpp``: Snake in one pass, torch's numbers bit for bit (``engine.nn.snake_kernel``;
  AVX-512; ``AUDIOCPP_SNAKE_KERNEL=0``);
- ``mt19937.cpp``: torch's CPU random stream advanced, only the kept uniforms made
  (``engine.nn.rng``; AVX-512; ``AUDIOCPP_RNG_KERNEL=0``);
- ``row_attention.cpp``: a continuous batch's per-row decode attention as the Python loop's ATen
  calls, from C++ (``engine.nn.row_attention``; any CPU; ``AUDIOCPP_ROW_ATTENTION=0``).

Builds are cached in torch's extension folder (``TORCH_EXTENSIONS_DIR``) under a name that hashes
the source, the flags and torch's version, so one build serves every later process on the machine.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import jit

#: The modules that declare a kernel (``KERNEL``) and load it (``kernel()``), in build order.
MODULES = ("audiocpp.engine.nn.q8_0_linear", "audiocpp.engine.nn.bf16_linear",
           "audiocpp.engine.nn.snake_kernel", "audiocpp.engine.nn.rng", "audiocpp.engine.nn.row_attention")


@dataclass(frozen=True)
class KernelReport:
    """What :func:`build_all` did for one kernel: ``supported``: this CPU (and torch) can run it;
    ``built``: it is ready in this process (compiled now or found in torch's extension folder, and
    checked); ``seconds``: time taken; ``reason``: why it is not built (None when it is)."""

    name: str
    supported: bool
    built: bool
    seconds: float
    reason: str | None = None


def kernels() -> list[tuple[jit.Kernel, Callable[[], Any]]]:
    """Every kernel with the function that loads it (cached per process)."""
    found = []
    for name in MODULES:
        module = importlib.import_module(name)
        found.append((module.KERNEL, module.kernel))
    return found


def build_all(verbose: bool = False) -> list[KernelReport]:
    """Build (or load from torch's extension folder) every kernel this CPU supports, in this
    process, and report on each; kernels the CPU cannot run, or turned off by their switch, are
    reported and not built. ``verbose``: say on stderr which kernel is being built and, for a
    failure, why, with the tail of the compiler's output (as ``AUDIOCPP_DEBUG=1`` does)."""
    reports = []
    for kernel, load in kernels():
        unsupported = kernel.unsupported()
        if unsupported is not None:
            reports.append(KernelReport(kernel.name, False, False, 0.0, unsupported))
            continue
        if kernel.off():
            reports.append(KernelReport(kernel.name, True, False, 0.0, f"turned off ({kernel.switch}=0)"))
            continue
        start = time.perf_counter()
        with jit.verbose(verbose):
            loaded = load()
        seconds = time.perf_counter() - start
        reason = None if loaded is not None else jit.why_not(kernel) or "not built"
        reports.append(KernelReport(kernel.name, True, loaded is not None, seconds, reason))
    return reports
