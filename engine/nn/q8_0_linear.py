"""Linear layers that compute with a Q8_0 (or Q4_0) matrix's own blocks on the CPU (AVX512-VNNI).

Q8_0 stores a matrix as blocks of 32 int8 values along a row with one f16 scale each. This layer
keeps exactly those values and scales resident (34 bytes per 32 weights, as in the file) and
computes as ggml does: each row of the input is quantized per block of 32 to int8 with one float32
scale (``d = max|x| / 127``, values rounded half to even), the int8 dot product of each pair of
blocks is summed exactly in int32 by ``vpdpbusd``, and the block sums are accumulated in float32
weighted by the two scales::

    y[m, n] = sum_b  dx[m, b] * dw[n, b] * sum_{k in b} qx[m, k] * qw[n, k]

Scaling each block of the input on its own keeps the error of outlier channels to their own
blocks: about 0.5 % relative output error per layer against the Q8_0 matrix in float (the error
of Q8_0 itself is another 0.5 %; the per-row int8 layer it replaces was at 1.0 %), and it runs
1.5-3x faster than the oneDNN bfloat16 GEMM from one row to hundreds (``tools/bench_kernels.py``,
docs/numerics.md). A NaN or infinite input makes its row's outputs NaN, as float math would.
Q4_0 matrices run the same way with their 4-bit values (value = nibble - 8) kept 4-bit.

The kernel is compiled on first use (``engine.nn.jit``) where the CPU has AVX512-VNNI; elsewhere,
off the CPU, or with ``AUDIOCPP_Q8_0_KERNEL=0``, quantized matrices take ``engine.nn.quantized``'s
int4 or int8 layers instead.

Layout: output features in groups of 16; for each group and block of 32 inputs, Q8_0: 512 bytes,
8 steps of (16 features x 4 consecutive inputs), the values stored unsigned (``q + 128``, as
``vpdpbusd`` takes them; the input's block sums put the offset back); Q4_0: 256 bytes, 4 steps
whose bytes hold step ``s`` in the low nibble and ``s + 4`` in the high one. Then the scales as f16
``(groups, blocks, 16)``, held as their int16 bits so that no dtype cast of the module alters them.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import torch
from torch import nn

from ..weights.blocks import BLOCK, BlockTensor
from . import jit

#: Output features per group of the packed layout (one AVX-512 register of int32 sums).
GROUP = 16
#: Rows packed at a time at load (bounds the int8 copy taken from the file).
_CHUNK_ROWS = 1024

_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <cmath>
#include <cstring>

// the stored values q [n, K] (n a multiple of 16) and the packed buffer of BITS per value they go into
static void check_pack(const at::Tensor& q, const at::Tensor& out, at::ScalarType stored, int bits) {
  TORCH_CHECK(q.device().is_cpu() && out.device().is_cpu(), "the Q8_0 kernel runs on the CPU");
  TORCH_CHECK(q.scalar_type() == stored && q.is_contiguous() && out.scalar_type() == at::kByte && out.is_contiguous());
  TORCH_CHECK(q.dim() == 2 && q.size(0) % 16 == 0 && q.size(1) % 32 == 0 && out.numel() * 8 == q.numel() * bits,
              "rows in 16s, columns in 32s");
}

// Q8_0: q int8 [n, K] -> out uint8 [n / 16, K / 32, 8 steps, 16 features, 4 inputs], q + 128
void pack_q8_into(const at::Tensor& q, at::Tensor& out) {
  check_pack(q, out, at::kChar, 8);
  const int64_t n = q.size(0), K = q.size(1), KB = K / 32;
  const uint32_t* src = reinterpret_cast<const uint32_t*>(q.data_ptr<int8_t>());
  uint32_t* dst = reinterpret_cast<uint32_t*>(out.data_ptr<uint8_t>());
  const int64_t words = K / 4;
  at::parallel_for(0, n / 16, 1, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g)
      for (int64_t kb = 0; kb < KB; ++kb) {
        uint32_t* o = dst + (g * KB + kb) * 128;
        for (int s = 0; s < 8; ++s)
          for (int c = 0; c < 16; ++c)
            o[s * 16 + c] = src[(g * 16 + c) * words + kb * 8 + s] ^ 0x80808080u;
      }
  });
}

// Q4_0: nibbles uint8 0..15 [n, K] -> out uint8 [n / 16, K / 32, 4 step pairs, 16 features, 4 inputs]: step s in
// the low nibble, step s + 4 in the high one (value = nibble - 8)
void pack_q4_into(const at::Tensor& q, at::Tensor& out) {
  check_pack(q, out, at::kByte, 4);
  const int64_t n = q.size(0), K = q.size(1), KB = K / 32;
  const uint8_t* src = q.data_ptr<uint8_t>();
  uint8_t* dst = out.data_ptr<uint8_t>();
  at::parallel_for(0, n / 16, 1, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g)
      for (int64_t kb = 0; kb < KB; ++kb) {
        uint8_t* o = dst + (g * KB + kb) * 256;
        for (int s = 0; s < 4; ++s)
          for (int c = 0; c < 16; ++c)
            for (int i = 0; i < 4; ++i) {
              const uint8_t* row = src + (g * 16 + c) * K + kb * 32;
              o[(s * 16 + c) * 4 + i] = (uint8_t)((row[s * 4 + i] & 15) | ((row[(s + 4) * 4 + i] & 15) << 4));
            }
      }
  });
}

// x float [M, K] -> per block of 32: int8 values, float scale, and the sum of the values (times the
// weights' unsigned offset it gives back what the offset added)
static void quantize_rows(const float* x, int64_t M, int64_t K, int8_t* xq, float* xs, int32_t* xsum) {
  const int64_t KB = K / 32;
  at::parallel_for(0, M, 8, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m)
      for (int64_t kb = 0; kb < KB; ++kb) {
        const float* p = x + m * K + kb * 32;
        __m512 a = _mm512_loadu_ps(p), b = _mm512_loadu_ps(p + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
        const bool nonfinite = _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q) || _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q) ||
                               !(amax <= 3.4028234663852886e38f);
        float d = amax / 127.0f;
        __m512 id = _mm512_set1_ps(amax > 0.0f && !nonfinite ? 1.0f / d : 0.0f);
        __m512i ia = _mm512_cvtps_epi32(_mm512_mul_ps(a, id));  // round half to even
        __m512i ib = _mm512_cvtps_epi32(_mm512_mul_ps(b, id));
        _mm_storeu_si128((__m128i*)(xq + m * K + kb * 32), _mm512_cvtsepi32_epi8(ia));
        _mm_storeu_si128((__m128i*)(xq + m * K + kb * 32 + 16), _mm512_cvtsepi32_epi8(ib));
        xs[m * KB + kb] = nonfinite ? NAN : d;  // a NaN or infinite input makes its outputs NaN, as float math would
        xsum[m * KB + kb] = _mm512_reduce_add_epi32(_mm512_add_epi32(ia, ib));
      }
  });
}

static inline __m512i broadcast4(const int8_t* p) {
  int32_t four;
  std::memcpy(&four, p, 4);
  return _mm512_set1_epi32(four);
}

// R rows x V groups of 16 features over all of K; BITS 8 (Q8_0, offset 128) or 4 (Q4_0, offset 8)
template <int R, int V, int BITS>
static inline void tile(const int8_t* xq, const float* xs, const int32_t* xsum, int64_t K, const uint8_t* w,
                        const uint16_t* sc, int64_t g0, float* y, int64_t ldy) {
  constexpr int64_t BYTES = BITS == 8 ? 512 : 256;  // per group and block of 32
  constexpr int32_t OFFSET = BITS == 8 ? 128 : 8;
  const int64_t KB = K / 32;
  __m512 acc[R][V];
  for (int r = 0; r < R; ++r) for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t kb = 0; kb < KB; ++kb) {
    __m512i sum[R][V];
    for (int r = 0; r < R; ++r) {
      const __m512i offset = _mm512_set1_epi32(-OFFSET * xsum[r * KB + kb]);
      for (int v = 0; v < V; ++v) sum[r][v] = offset;
    }
    const uint8_t* wb[V];
    for (int v = 0; v < V; ++v) wb[v] = w + ((g0 + v) * KB + kb) * BYTES;
    const int8_t* xb = xq + kb * 32;
    if constexpr (BITS == 8) {
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) {
        __m512i b[V];
        for (int v = 0; v < V; ++v) b[v] = _mm512_load_si512((const void*)(wb[v] + s * 64));
        for (int r = 0; r < R; ++r) {
          const __m512i a = broadcast4(xb + r * K + s * 4);
          for (int v = 0; v < V; ++v) sum[r][v] = _mm512_dpbusd_epi32(sum[r][v], b[v], a);
        }
      }
    } else {
      const __m512i low = _mm512_set1_epi8(15);
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        __m512i raw[V], b[V];
        for (int v = 0; v < V; ++v) {
          raw[v] = _mm512_load_si512((const void*)(wb[v] + s * 64));
          b[v] = _mm512_and_si512(raw[v], low);
        }
        for (int r = 0; r < R; ++r) {
          const __m512i a = broadcast4(xb + r * K + s * 4);
          for (int v = 0; v < V; ++v) sum[r][v] = _mm512_dpbusd_epi32(sum[r][v], b[v], a);
        }
        for (int v = 0; v < V; ++v) b[v] = _mm512_and_si512(_mm512_srli_epi16(raw[v], 4), low);
        for (int r = 0; r < R; ++r) {
          const __m512i a = broadcast4(xb + r * K + (s + 4) * 4);
          for (int v = 0; v < V; ++v) sum[r][v] = _mm512_dpbusd_epi32(sum[r][v], b[v], a);
        }
      }
    }
    __m512 ws[V];
    for (int v = 0; v < V; ++v) ws[v] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(sc + ((g0 + v) * KB + kb) * 16)));
    for (int r = 0; r < R; ++r) {
      const __m512 d = _mm512_set1_ps(xs[r * KB + kb]);
      for (int v = 0; v < V; ++v)
        acc[r][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[r][v]), _mm512_mul_ps(ws[v], d), acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r) for (int v = 0; v < V; ++v) _mm512_storeu_ps(y + r * ldy + (g0 + v) * 16, acc[r][v]);
}

template <int V, int BITS>
static void rows(const int8_t* xq, const float* xs, const int32_t* xsum, int64_t m0, int64_t m1, int64_t K,
                 const uint8_t* w, const uint16_t* sc, int64_t g0, float* y, int64_t N) {
  const int64_t KB = K / 32;
  int64_t m = m0;
  for (; m + 4 <= m1; m += 4) tile<4, V, BITS>(xq + m * K, xs + m * KB, xsum + m * KB, K, w, sc, g0, y + m * N, N);
  switch (m1 - m) {
    case 3: tile<3, V, BITS>(xq + m * K, xs + m * KB, xsum + m * KB, K, w, sc, g0, y + m * N, N); break;
    case 2: tile<2, V, BITS>(xq + m * K, xs + m * KB, xsum + m * KB, K, w, sc, g0, y + m * N, N); break;
    case 1: tile<1, V, BITS>(xq + m * K, xs + m * KB, xsum + m * KB, K, w, sc, g0, y + m * N, N); break;
    default: break;
  }
}

template <int BITS>
static void run(const int8_t* qp, const float* sp, const int32_t* cp, int64_t M, int64_t K, const uint8_t* wp,
                const uint16_t* scp, int64_t G, float* yp) {
  constexpr int V = 3;        // groups of 16 features per tile
  constexpr int64_t MC = 64;  // rows per task: tasks of one group of features share its weights in cache
  const int64_t N = G * 16, vgroups = (G + V - 1) / V, mchunks = (M + MC - 1) / MC;
  at::parallel_for(0, vgroups * mchunks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t g0 = (t / mchunks) * V, m0 = (t % mchunks) * MC, m1 = std::min(M, m0 + MC);
      switch (std::min<int64_t>(V, G - g0)) {
        case 3: rows<3, BITS>(qp, sp, cp, m0, m1, K, wp, scp, g0, yp, N); break;
        case 2: rows<2, BITS>(qp, sp, cp, m0, m1, K, wp, scp, g0, yp, N); break;
        default: rows<1, BITS>(qp, sp, cp, m0, m1, K, wp, scp, g0, yp, N); break;
      }
    }
  });
}

// x [M, K] (any float dtype), w and sc packed (512 bytes per group and block: Q8_0, 256: Q4_0)
// -> float32 [M, groups * 16]
at::Tensor block_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& sc) {
  TORCH_CHECK(x.device().is_cpu() && w.device().is_cpu() && sc.device().is_cpu(), "the Q8_0 kernel runs on the CPU");
  TORCH_CHECK(x.dim() == 2 && w.dim() == 3 && sc.dim() == 3 && (w.size(2) == 512 || w.size(2) == 256) && sc.size(2) == 16);
  TORCH_CHECK(w.scalar_type() == at::kByte && sc.scalar_type() == at::kShort && w.is_contiguous() && sc.is_contiguous());
  const int64_t G = w.size(0), KB = w.size(1), K = KB * 32, N = G * 16;
  TORCH_CHECK(x.size(1) == K && sc.size(0) == G && sc.size(1) == KB, "x [M, K] against the packed matrix");
  auto xf = x.to(at::kFloat).contiguous();
  const int64_t M = xf.size(0);
  auto y = at::empty({M, N}, xf.options());
  if (M == 0) return y;
  auto xq = at::empty({M, K}, xf.options().dtype(at::kChar));
  auto xs = at::empty({M, KB}, xf.options());
  auto xsum = at::empty({M, KB}, xf.options().dtype(at::kInt));
  quantize_rows(xf.data_ptr<float>(), M, K, xq.data_ptr<int8_t>(), xs.data_ptr<float>(), xsum.data_ptr<int32_t>());
  const uint16_t* scp = reinterpret_cast<const uint16_t*>(sc.data_ptr<int16_t>());
  if (w.size(2) == 512)
    run<8>(xq.data_ptr<int8_t>(), xs.data_ptr<float>(), xsum.data_ptr<int32_t>(), M, K, w.data_ptr<uint8_t>(), scp, G, y.data_ptr<float>());
  else
    run<4>(xq.data_ptr<int8_t>(), xs.data_ptr<float>(), xsum.data_ptr<int32_t>(), M, K, w.data_ptr<uint8_t>(), scp, G, y.data_ptr<float>());
  return y;
}
"""

_FLAGS = ("avx512f", "avx512bw", "avx512vl", "avx512_vnni", "f16c", "fma")


@cache
def kernel() -> Any | None:
    """The compiled ops (``pack_q8_into``, ``pack_q4_into``, ``block_linear``), or None where they
    cannot be built or run (checked against :func:`reference` once, both layouts).
    ``AUDIOCPP_Q8_0_KERNEL=0`` disables them."""
    if jit.disabled("AUDIOCPP_Q8_0_KERNEL"):
        return None
    module = jit.build("audiocpp_q8_0_linear_v6", _SOURCE, ["pack_q8_into", "pack_q4_into", "block_linear"],
                       cpu_flags_needed=_FLAGS,
                       cflags=["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512vnni", "-mf16c", "-mfma"])
    if module is None:
        return None
    gen = torch.Generator().manual_seed(0)
    scales = (torch.rand(80, 3, generator=gen) * 0.01).to(torch.float16).float()
    x = torch.randn(6, 96, generator=gen)  # a tile of 4 rows + a tail of 2
    for low, high in ((-127, 128), (-8, 8)):  # Q8_0, Q4_0 values
        values = torch.randint(low, high, (80, 96), dtype=torch.int8, generator=gen)  # 5 groups: 3 + a tail of 2
        packed = _pack_values(module, values, bits=8 if high > 8 else 4)
        got = module.block_linear(x, packed, _pack_scales(scales))
        if not torch.allclose(got.double(), reference(x, values, scales), rtol=1e-5, atol=1e-6):
            return None
    return module


def reference(x: torch.Tensor, values: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """What the kernel computes, in float64 from the same quantized input: ``x`` (M, K), the
    matrix's integer ``values`` (N, K) and float ``scales`` (N, K / 32)."""
    rows, cols = x.shape
    blocks = x.float().reshape(rows, cols // BLOCK, BLOCK)
    d = blocks.abs().amax(-1) / 127
    inverse = torch.where(d > 0, 1 / d, torch.zeros_like(d))
    qx = torch.round(blocks * inverse[..., None]).double()
    qw = values.reshape(values.shape[0], cols // BLOCK, BLOCK).double()
    sums = torch.einsum("mbk,nbk->mnb", qx, qw)
    return (sums * d.double()[:, None, :] * scales.double()[None, :, :]).sum(-1)


def _packed(rows: int, cols: int, bits: int) -> torch.Tensor:
    """An empty buffer in the kernel's layout for a ``(rows, cols)`` matrix of ``bits``-bit values."""
    return torch.empty((rows // GROUP, cols // BLOCK, 64 * bits), dtype=torch.uint8)


def _pack_stored(op: Any, stored: torch.Tensor, out: torch.Tensor) -> None:
    """Values as the formats store them, Q8_0's int8 or Q4_0's nibbles (uint8 0..15), into ``out``."""
    (op.pack_q8_into if stored.dtype == torch.int8 else op.pack_q4_into)(stored.contiguous(), out)


def _pack_values(op: Any, values: torch.Tensor, bits: int) -> torch.Tensor:
    """Integer values ``(rows, cols)`` (int8; Q4_0's -8..7 with ``bits=4``) in the kernel's layout."""
    stored = values.to(torch.int8) if bits == 8 else (values.to(torch.int16) + 8).to(torch.uint8)
    out = _packed(*values.shape, bits)
    _pack_stored(op, stored, out)
    return out


def _pack_scales(scales: torch.Tensor) -> torch.Tensor:
    rows, blocks = scales.shape
    # int16 bits of the f16 scales: no cast of the module's floating tensors can touch them
    return scales.to(torch.float16).reshape(rows // GROUP, GROUP, blocks).transpose(1, 2).contiguous().view(torch.int16)


def supports(blocks: BlockTensor) -> bool:
    """Whether ``blocks`` can take this layer here (the kernel builds; whole groups of 16 rows)."""
    return blocks.shape[0] % GROUP == 0 and kernel() is not None


class Q8_0Linear(nn.Module):
    """``y = x W^T + b`` with ``W`` a Q8_0 or Q4_0 matrix's values (8 or 4 bits resident, as stored)
    and block scales, computed by the VNNI kernel with int8 rows per block (CPU only; any float
    input, output in the input's dtype).

    ``packed`` and ``scales`` are non-persistent buffers (not the checkpoint's names); ``bias`` is
    an ordinary parameter, loaded by name."""

    def __init__(self, packed: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        groups, blocks, nbytes = packed.shape
        self.out_features, self.in_features = groups * GROUP, blocks * BLOCK
        self.bits = 8 if nbytes == 512 else 4
        self.register_buffer("packed", packed, persistent=False)
        self.register_buffer("scales", scales, persistent=False)
        self.bias = None if bias is None else nn.Parameter(bias, requires_grad=False)

    @classmethod
    def from_blocks(cls, blocks: BlockTensor) -> Q8_0Linear:
        op = _kernel_for(blocks.shape[0])
        rows, cols = blocks.shape
        q8 = blocks.qtype == "Q8_0"
        packed = _packed(rows, cols, 8 if q8 else 4)
        for lo in range(0, rows, _CHUNK_ROWS):
            chunk = blocks.row_slice(lo, lo + _CHUNK_ROWS)
            stored = chunk.q8() if q8 else chunk.nibbles()
            _pack_stored(op, torch.from_numpy(stored), packed[lo // GROUP:(lo + chunk.shape[0]) // GROUP])
        return cls(packed, _pack_scales(torch.from_numpy(blocks.scales())))

    @classmethod
    def from_values(cls, values: torch.Tensor, scales: torch.Tensor, bits: int = 8) -> Q8_0Linear:
        """The layer for integer ``values`` ``(out, in)`` (int8, or Q4_0's -8..7 with ``bits=4``)
        and block ``scales`` ``(out, in / 32)`` (rounded to f16, as the formats store them)."""
        return cls(_pack_values(_kernel_for(values.shape[0]), values, bits), _pack_scales(scales))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        y = kernel().block_linear(x.reshape(-1, self.in_features), self.packed, self.scales)
        if self.bias is not None:
            y += self.bias.float()
        return y.to(x.dtype).reshape(*lead, self.out_features)

    def values(self) -> torch.Tensor:
        """The matrix's integer values ``(out, in)`` as int8, unpacked."""
        groups, blocks, _ = self.packed.shape
        if self.bits == 8:
            steps = (self.packed ^ 0x80).view(torch.int8).view(groups, blocks, 8, GROUP, 4)
        else:
            pairs = self.packed.view(groups, blocks, 4, GROUP, 4)
            steps = (torch.cat([pairs & 15, pairs >> 4], dim=2).to(torch.int16) - 8).to(torch.int8)
        return steps.permute(0, 3, 1, 2, 4).reshape(self.out_features, self.in_features)

    def dequantized(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The weight matrix these values and block scales stand for."""
        scales = self.scales.view(torch.float16).transpose(1, 2).reshape(self.out_features, -1).float()
        w = self.values().float().view(self.out_features, -1, BLOCK) * scales[..., None]
        return w.view(self.out_features, self.in_features).to(dtype)

    def extra_repr(self) -> str:
        kind = "Q8_0" if self.bits == 8 else "Q4_0"
        return f"in_features={self.in_features}, out_features={self.out_features}, {kind} blocks, int8 rows per block"


def _kernel_for(rows: int) -> Any:
    op = kernel()
    if op is None or rows % GROUP:
        raise ValueError("the Q8_0 kernel is not available here, or the rows are not in groups of 16")
    return op
