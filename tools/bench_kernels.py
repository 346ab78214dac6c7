#!/usr/bin/env python3
"""The kernels measured: our C++ kernels per ISA level, or the linear layers a Q8_0 package could
compute with on the CPU side by side (the figures behind engine/nn/linear/quantized.py and docs/numerics.md).

    python tools/bench_kernels.py --isa all [--threads 2] [--rows 1,8,64,400] [--shape 2048x6144]
    python tools/bench_kernels.py [--threads 1] [--rows 1,2,8,16,64,400] [--shapes 2048x6144,1024x3072]

``--isa LEVELS`` (``all``: every level this CPU has, best first; or e.g. ``avx2,avx512``): each of our
kernels compiled for each level (``engine.nn.kernels.jit``), in one process, on the same data: the Q8_0 and
Q4_0 linear (ms per call, GFLOP/s; for one row also the GB/s of weights read and that as a fraction
of the machine's read bandwidth, measured first as a sum over 1 GiB, with the matrices cycled over
``--working-set`` GiB so that they come from memory, not from a cache), the bf16-weight linear, Snake
(GB/s in and out) and the MT19937 stream (million draws per second). torch's own kernels run at this
process's level (hold them with ``engine.nn.kernels.cpu_isa.LEVEL_ENV`` to compare a whole AVX2 process).

Without ``--isa``, the comparison of the layers a Q8_0 package could take:

Speed: milliseconds per call of ``y = x W^T`` for each row count, W of ``out x in`` features:
float32 and bfloat16 GEMM with oneDNN-packed weights (``engine.nn.linear.packed_linear``), int8 weights
with one scale per row on ``torch._weight_int8pack_mm`` (bfloat16 rows), the same int8 matrix
converted to bfloat16 per call then the bfloat16 GEMM (``engine.nn.linear.quantized.Int8Linear`` beyond
its row threshold), Q8_0's own blocks on the VNNI kernel with int8 rows per block of 32
(``engine.nn.linear.q8_0_linear``, where it builds), Q4_0 on ``torch._weight_int4pack_mm_for_cpu`` and on
the VNNI kernel,
``torch.ao`` dynamic quantized linear (int8 activations per tensor, VNNI) and ``torch._int_mm``
with int8 activations per row.
Error: relative output error against float64 on random weights, rows with and without a few
outlier channels (x20 on 1 % of the input features).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

from audiocpp.engine.nn.linear import q8_0_linear

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: tools.* imports
    sys.path.insert(0, str(REPO))
from tools.bench_common import seconds_per_call  # noqa: E402

warnings.filterwarnings("ignore")


def q8_0_blocks(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q8_0 of ``w``: int8 values ``(n, k)`` and the f16-rounded scale of each block of 32 ``(n, k / 32)``."""
    n, k = w.shape
    b = w.view(n, k // 32, 32)
    d = (b.abs().amax(-1) / 127).half().float()
    return torch.round(b / d[..., None].clamp_min(1e-30)).clamp(-127, 127).to(torch.int8).view(n, k), d


def q8_0(w: torch.Tensor) -> torch.Tensor:
    """Q8_0's values of ``w`` (blocks of 32 along a row, f16 scale), dequantized."""
    values, d = q8_0_blocks(w)
    n, k = w.shape
    return (values.float().view(n, k // 32, 32) * d[..., None]).view(n, k)


def per_row(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    s = w.abs().amax(1) / 127
    return torch.round(w / s[:, None]).clamp(-127, 127).to(torch.int8), s


def kernels(w: torch.Tensor) -> dict:
    n, k = w.shape
    wq = q8_0(w)
    q, s = per_row(wq)
    sb = s.to(torch.bfloat16)
    packed32 = torch.ops.mkldnn._reorder_linear_weight(w)
    packed16 = torch.ops.mkldnn._reorder_linear_weight(w.to(torch.bfloat16))
    g = w.view(n, k // 32, 32)
    d4 = g.abs().amax(-1) / 7
    nib = (torch.round(g / d4[..., None]).clamp(-8, 7) + 8).view(n, k).to(torch.int32)
    int4 = torch.ops.aten._convert_weight_to_int4pack_for_cpu(nib, 2)
    sz = torch.stack([d4.t(), torch.zeros_like(d4.t())], -1).to(torch.bfloat16).contiguous()
    lin = torch.nn.Linear(k, n, bias=False)
    lin.weight.data = wq.clone()
    dyn = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(lin), {torch.nn.Linear},
                                                 dtype=torch.qint8)

    q8_kernel = q4_kernel = None
    if q8_0_linear.kernel() is not None:
        q8_kernel = q8_0_linear.Q8_0Linear.from_values(*q8_0_blocks(w)).forward
        q4_kernel = q8_0_linear.Q8_0Linear.from_values((nib - 8).to(torch.int8), d4, bits=4).forward

    def int_mm(x):
        xs = x.abs().amax(1, keepdim=True) / 127
        return torch._int_mm(torch.round(x / xs).to(torch.int8), q.t()).float() * xs * s

    return {
        "f32 packed": lambda x: torch.ops.mkldnn._linear_pointwise(x, packed32, None, "none", [], ""),
        "bf16 packed": lambda x: torch.ops.mkldnn._linear_pointwise(x.bfloat16(), packed16, None, "none", [],
                                                                    ""),
        "int8pack": lambda x: torch._weight_int8pack_mm(x.bfloat16(), q, sb),
        "int8->bf16 GEMM": lambda x: F.linear(x.bfloat16(), q.to(torch.bfloat16)) * sb,
        **({"Q8_0 kernel": lambda x: q8_kernel(x.bfloat16())} if q8_kernel else {}),
        "q4_0 int4pack": lambda x: torch.ops.aten._weight_int4pack_mm_for_cpu(x.bfloat16(), int4, 32, sz),
        **({"Q4_0 kernel": lambda x: q4_kernel(x.bfloat16())} if q4_kernel else {}),
        "ao dynamic int8": lambda x: dyn(x),
        "int_mm per-row": int_mm,
        "_q8_0_f32": lambda x: F.linear(x, wq),
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int)
    ap.add_argument("--rows", help="row counts (default 1,2,8,16,64,400; with --isa 1,8,64,400)")
    ap.add_argument("--shapes", default="2048x6144,1024x3072", help="in x out features")
    ap.add_argument("--isa", help="our kernels at these ISA levels (all: every level this CPU has)")
    ap.add_argument("--shape", default="2048x6144", help="with --isa: in x out features")
    ap.add_argument("--working-set", type=float, default=1.5,
                    help="with --isa: GiB of packed matrices the one-row product cycles through")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads or (2 if args.isa else 1))
    if args.isa:
        from tools.bench_kernel_levels import isa_table

        args.rows = args.rows or "1,8,64,400"
        return isa_table(args)
    args.rows = args.rows or "1,2,8,16,64,400"
    torch.manual_seed(0)
    rows = [int(r) for r in args.rows.split(",")]
    for shape in args.shapes.split(","):
        k, n = (int(v) for v in shape.split("x"))
        w = torch.randn(n, k) * 0.02
        ks = kernels(w)
        names = [name for name in ks if name != "_q8_0_f32"]
        print(f"\n== {k} -> {n} features, {args.threads} thread(s): ms per call")
        print(f"{'rows':>5s} " + " ".join(f"{name:>16s}" for name in names))
        for m in rows:
            x = torch.randn(m, k)
            ms = [1e3 * seconds_per_call(lambda f=ks[name], x=x: f(x)) for name in names]
            print(f"{m:5d} " + " ".join(f"{t:16.3f}" for t in ms), flush=True)
        print(f"relative output error vs float64 ({k} -> {n}, 16 rows):")
        for outliers in (0, 20):
            x = torch.randn(16, k)
            if outliers:
                x[:, torch.randperm(k)[: k // 100]] *= outliers
            ref = F.linear(x.double(), w.double())
            errs = {"bf16 weights+rows": F.linear(x.bfloat16(), w.bfloat16()),
                    "Q8_0 (float32)": ks["_q8_0_f32"](x),
                    **{name: ks[name](x) for name in ("int8pack", "int8->bf16 GEMM", "Q8_0 kernel",
                                                      "ao dynamic int8", "int_mm per-row") if name in ks}}
            line = ", ".join(f"{name} {float((y.double() - ref).norm() / ref.norm()):.2%}"
                             for name, y in errs.items())
            print(f"  {'x20 outlier channels' if outliers else 'plain rows':22s} {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
