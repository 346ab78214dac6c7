"""``tools/bench_kernels.py --isa LEVELS``: each of our C++ kernels compiled for each ISA level, on the
same data in one process (see that tool's docstring)."""

from __future__ import annotations

import argparse
from typing import Any

import torch

from audiocpp.engine.nn.kernels import cpu_isa, jit, rng, snake_kernel
from audiocpp.engine.nn.linear import bf16_linear, q8_0_linear
from tools.bench_common import gemm_rate, isa_levels, read_bandwidth, seconds_per_call


class Q8Bench:
    """The Q8_0 / Q4_0 linear of one ``k -> n`` shape: hot calls per row count, and the one-row
    product over enough matrices that they come from memory."""

    def __init__(self, k: int, n: int, working_set_gib: float) -> None:
        self.k, self.n = k, n
        self.copies = max(1, int(working_set_gib * 2**30 // (n * k * 34 // 32)))
        gen = torch.Generator().manual_seed(0)
        values = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=gen)
        scales = torch.rand(n, k // 32, generator=gen) * 0.01
        self.raw = {8: q8_0_linear.raw_blocks(values, scales, 8),
                    4: q8_0_linear.raw_blocks((values // 16).clamp(-8, 7), scales, 4)}

    def pack(self, op: Any, bits: int) -> tuple[torch.Tensor, ...]:
        return q8_0_linear._pack_raw(op, self.raw[bits], self.n, self.k, bits)

    def hot(self, op: Any, bits: int, rows: list[int]) -> list[str]:
        packed = self.pack(op, bits)
        cells = []
        for m in rows:
            x = torch.randn(m, self.k)
            t = seconds_per_call(lambda x=x: op.block_linear(x, *packed))
            cells.append(f"{t * 1e3:8.3f} ({2 * m * self.n * self.k / t / 1e9:6.0f})")
        return cells

    def cold_row(self, op: Any, bits: int) -> float:
        """Bytes of weights per second of the one-row product, cycling through the copies."""
        matrices = [self.pack(op, bits) for _ in range(self.copies)]
        x = torch.randn(1, self.k)
        turn = [0]

        def step() -> None:
            op.block_linear(x, *matrices[turn[0] % len(matrices)])
            turn[0] += 1

        return self.n * self.k * (34 if bits == 8 else 18) / 32 / seconds_per_call(step)


def q8_table(levels: list[str], rows: list[int], bench: Q8Bench, bandwidth: float) -> None:
    gib = bench.copies * bench.n * bench.k * 34 / 32 / 2**30
    print(f"\n== Q8_0 / Q4_0 linear, {bench.k} -> {bench.n} features: ms per call (GFLOP/s); one row from "
          f"memory: GB/s of weights, and that over the read bandwidth ({bench.copies} matrices, "
          f"{gib:.2f} GiB)")
    print(f"{'level':10s} {'type':5s} " + " ".join(f"{f'{m} rows':>19s}" for m in rows)
          + f" {'one row, memory':>24s}")
    for level in levels:
        op = q8_0_linear.kernel_at(level)
        if op is None:
            kernel = q8_0_linear.KERNEL
            print(f"{level:10s} not built: {jit.why_not(kernel, kernel.variant(level))}")
            continue
        for bits in (8, 4):
            cells = bench.hot(op, bits, rows)
            rate = bench.cold_row(op, bits)
            cells.append(f"{rate / 1e9:6.1f} GB/s = {rate / bandwidth:5.0%}")
            kind = "Q8_0" if bits == 8 else "Q4_0"
            print(f"{level:10s} {kind:5s} " + " ".join(f"{c:>19s}" for c in cells), flush=True)


def bf16_table(levels: list[str], k: int, n: int) -> None:
    w = torch.randn(n, k).to(torch.bfloat16)
    print(f"\n== bf16-weight linear (float32 math), {k} -> {n}: ms per call (GFLOP/s; one row: GB/s of "
          "weights)")
    for level in levels:
        op = bf16_linear.kernel_at(level).linear_bf16w
        cells = []
        for m in (1, 8):
            x = torch.randn(m, k)
            t = seconds_per_call(lambda x=x, op=op: op(x, w, None))
            extra = f", {n * k * 2 / t / 1e9:.1f} GB/s" if m == 1 else ""
            cells.append(f"{m} rows {t * 1e3:.3f} ({2 * m * n * k / t / 1e9:.0f}{extra})")
        print(f"{level:10s} " + "   ".join(cells), flush=True)


def elementwise_table(levels: list[str]) -> None:
    x = torch.randn(4096, 1024)
    alpha = torch.rand(1024) + 0.05
    inverse = (alpha + 1e-9).reciprocal()
    passes = seconds_per_call(lambda: snake_kernel.snake_passes(x, alpha))
    print(f"\n== Snake over 4096 x 1024 float32 (GB/s in + out; torch's five passes {passes * 1e3:.2f} ms); "
          "MT19937: 155,776 draws, 4,097 kept (Audio8 0.6B's semantic row)")
    positions = torch.arange(0, 155776, 38)
    state = torch.Generator().manual_seed(1).get_state()
    for level in levels:
        snake = snake_kernel.kernel_at(level).snake_channels_last
        draw = rng.kernel_at(level).uniform_at
        t32 = seconds_per_call(lambda snake=snake: snake(x, alpha, inverse, False))
        t16 = seconds_per_call(lambda snake=snake: snake(x, alpha, inverse, True))
        tmt = seconds_per_call(lambda draw=draw: draw(state, 155776, positions))
        print(f"{level:10s} snake float32 out {t32 * 1e3:.2f} ms ({x.nbytes * 2 / t32 / 1e9:.1f} GB/s), "
              f"bfloat16 out {t16 * 1e3:.2f} ms; mt19937 {tmt * 1e3:.3f} ms "
              f"({155776 / tmt / 1e6:.0f} M draws/s)", flush=True)


def isa_table(args: argparse.Namespace) -> int:
    """Every kernel at every level asked for, on the same data, in this process."""
    levels = isa_levels(args.isa)
    k, n = (int(v) for v in args.shape.split("x"))
    rows = [int(r) for r in args.rows.split(",")]
    bandwidth = read_bandwidth()
    print(f"{cpu_isa.describe()}; {torch.get_num_threads()} thread(s); torch at "
          f"{torch.backends.cpu.get_cpu_capability()}: float32 GEMM {gemm_rate() / 1e9:.0f} GFLOP/s, "
          f"read bandwidth {bandwidth / 1e9:.1f} GB/s (a sum over 1 GiB)")
    q8_table(levels, rows, Q8Bench(k, n, args.working_set), bandwidth)
    bf16_table(levels, k, n)
    elementwise_table(levels)
    return 0
