"""The C++ kernels of ``engine.nn``, one ``.cpp`` file each in this folder (package data) with the
shared header ``isa.h``, and :func:`build_all`, which builds every kernel this CPU supports so that
set-up pays the compile instead of the first synthesis.

Each kernel is declared beside the Python that uses it (its ``KERNEL``, an ``engine.nn.kernels.jit.Kernel``:
the file, the functions bound, its variants per ISA level) and loaded by that module's ``kernel()``
(the build of the variant this process runs, then a check of the built kernel against a reference
and against its own portable code):

- ``q8_0_linear.cpp``: Q8_0 / Q4_0 blocks times int8 rows per block (``engine.nn.linear.q8_0_linear``;
  AVX-512 VNNI, AVX-VNNI, AVX2, NEON dotprod, NEON, portable; ``AUDIOCPP_Q8_0_KERNEL=0`` turns it off);
- ``bf16_linear.cpp``: float32 math over bfloat16-held weights (``engine.nn.linear.bf16_linear``; AVX-512,
  AVX2, NEON, portable; ``AUDIOCPP_BF16_LINEAR=0``);
- ``snake.cpp``: Snake in one pass, torch's numbers bit for bit (``engine.nn.kernels.snake_kernel``; AVX-512,
  AVX2, NEON, portable; ``AUDIOCPP_SNAKE_KERNEL=0``);
- ``mt19937.cpp``: torch's CPU random stream advanced, only the kept uniforms made
  (``engine.nn.kernels.rng``; AVX-512, AVX2, NEON, portable; ``AUDIOCPP_RNG_KERNEL=0``);
- ``row_attention.cpp``: a continuous batch's per-row decode attention as the Python loop's ATen
  calls, from C++ (``engine.nn.kernels.row_attention``; any CPU; ``AUDIOCPP_ROW_ATTENTION=0``);
- ``adain_act.cpp``: AdaIN + Snake or leaky ReLU in one pass for iSTFTNet decoders (Kokoro), float rounding
  apart the torch passes' numbers (``engine.nn.kernels.adain_kernel``; AVX-512, AVX2, NEON, portable, one
  loop the compiler vectorizes with the same bits at every level; ``AUDIOCPP_ADAIN_KERNEL=0``);
- ``int8_conv.cpp``: a 1-D convolution over int8 weights with the input quantized per tensor at run time,
  as onnxruntime's ``ConvInteger`` (``engine.nn.kernels.int8_conv``; AVX-512 VNNI, AVX-VNNI, AVX2,
  portable; exact int32 sums at every level; ``AUDIOCPP_INT8_CONV=0``);
- ``q8_block.cpp``: a stack of Q8_0 pre-norm blocks over a whole sequence in one call, the Python
  blocks' bits (``engine.nn.layers.q8_block``; built per level as the Q8_0 kernel it includes;
  ``AUDIOCPP_Q8_BLOCK=0``).

Every variant of a kernel gives the same bits as its portable code (``tests/kernels`` checks each
level natively and the NEON ones under qemu-aarch64). Builds are cached in torch's extension folder
(``TORCH_EXTENSIONS_DIR``) under a name that hashes the source, the flags and torch's version, so
one build serves every later process on the machine.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # jit imports torch: the package stays light for cpu_isa's readers (the CLI's checks)
    from . import jit

#: The modules that declare a kernel (``KERNEL``) and load it (``kernel()``), in build order.
MODULES = ("audiocpp.engine.nn.linear.q8_0_linear", "audiocpp.engine.nn.linear.bf16_linear",
           "audiocpp.engine.nn.kernels.snake_kernel", "audiocpp.engine.nn.kernels.rng",
           "audiocpp.engine.nn.kernels.row_attention", "audiocpp.engine.nn.layers.q8_block",
           "audiocpp.engine.nn.kernels.adain_kernel", "audiocpp.engine.nn.kernels.int8_conv")


@dataclass(frozen=True)
class KernelReport:
    """What :func:`build_all` did for one kernel: ``supported``: this CPU (and torch) can run it;
    ``built``: it is ready in this process (compiled now or found in torch's extension folder, and
    checked); ``seconds``: time taken; ``reason``: why it is not built (None when it is);
    ``variant``: the ISA level of the variant this process runs and ``why`` that one;
    ``variants``: every level the kernel is written for, best first."""

    name: str
    supported: bool
    built: bool
    seconds: float
    reason: str | None = None
    variant: str | None = None
    why: str = ""
    variants: tuple[str, ...] = ()


def kernels() -> list[tuple[jit.Kernel, Callable[[], Any]]]:
    """Every kernel with the function that loads it (cached per process)."""
    found: list[tuple[jit.Kernel, Callable[[], Any]]] = []
    for name in MODULES:
        module = importlib.import_module(name)
        found.append((module.KERNEL, module.kernel))
    return found


def build_all(verbose: bool = False) -> list[KernelReport]:
    """Build (or load from torch's extension folder) the variant of every kernel this process runs,
    and report on each; kernels the CPU cannot run, or turned off by their switch, are reported and
    not built. ``verbose``: say on stderr which kernel is being built and, for a failure, why, with
    the tail of the compiler's output (as ``AUDIOCPP_DEBUG=1`` does)."""
    from . import jit

    reports = []
    for kernel, load in kernels():
        variant, why = kernel.select()
        levels = tuple(dict.fromkeys(v.level for v in kernel.variants))
        common = {"variant": variant.level if variant is not None else None, "why": why, "variants": levels}
        if variant is None:
            reports.append(KernelReport(kernel.name, False, False, 0.0, why, **common))
            continue
        if kernel.off():
            reports.append(KernelReport(kernel.name, True, False, 0.0, f"turned off ({kernel.switch}=0)",
                                        **common))
            continue
        start = time.perf_counter()
        with jit.verbose(verbose):
            loaded = load()
        seconds = time.perf_counter() - start
        reason = None if loaded is not None else jit.why_not(kernel) or "not built"
        reports.append(KernelReport(kernel.name, True, loaded is not None, seconds, reason, **common))
    return reports
