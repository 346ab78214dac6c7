"""Float32 linear layers over bfloat16-stored weights (CPU, AVX-512).

Checkpoints often store weights in bfloat16 and references upcast them to float32 before
computing in float32. The upcast is exact, so a kernel that keeps the weights in bfloat16 and
widens each one to float32 as it multiplies computes the same products, accumulated in float32
with FMA, while reading half the bytes: one-row decode steps, bound by reading the weights, run
up to twice as fast. Only the summation order differs from torch's GEMM (a relative difference of
about 1e-6, like ``packed_linear``).

The kernel is a small C++ extension compiled on first use (``engine.nn.jit``); where it cannot be
built or run (no compiler, no AVX-512) nothing is converted and callers keep their layers.
:func:`convert_linears` converts only ``nn.Linear`` whose float32 weights are exactly bfloat16 values.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import torch
from torch import nn

from . import jit

_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <cstring>

static inline __m512 widen(const uint16_t* p) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)p)), 16));
}

static inline float widen1(uint16_t v) {
  uint32_t bits = ((uint32_t)v) << 16; float f; std::memcpy(&f, &bits, 4); return f;
}

// R rows of x (stride K) against C weight rows (stride K): R x C dot products, each weight and
// x vector loaded once per 16-wide step of k
template <int R, int C>
static inline void block(const float* x, const uint16_t* w, int64_t K, float* out, int64_t ldo) {
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r) for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    __m512 wv[C];
    for (int c = 0; c < C; ++c) wv[c] = widen(w + c * K + k);
    for (int r = 0; r < R; ++r) {
      __m512 xv = _mm512_loadu_ps(x + r * K + k);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r) for (int c = 0; c < C; ++c) {
    float s = _mm512_reduce_add_ps(acc[r][c]);
    for (int64_t j = k; j < K; ++j) s += x[r * K + j] * widen1(w[c * K + j]);
    out[r * ldo + c] = s;
  }
}

template <int C>
static inline void rows(const float* x, const uint16_t* w, int64_t M, int64_t K, float* y, int64_t N) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) block<4, C>(x + m * K, w, K, y + m * N, N);
  switch (M - m) {
    case 3: block<3, C>(x + m * K, w, K, y + m * N, N); break;
    case 2: block<2, C>(x + m * K, w, K, y + m * N, N); break;
    case 1: block<1, C>(x + m * K, w, K, y + m * N, N); break;
    default: break;
  }
}

at::Tensor linear_bf16w(const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& bias) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && w.scalar_type() == at::kBFloat16, "float32 x, bfloat16 w");
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), "x [M, K], w [N, K]");
  auto xc = x.contiguous();
  auto wc = w.contiguous();
  const int64_t M = xc.size(0), K = xc.size(1), N = wc.size(0);
  auto y = at::empty({M, N}, xc.options());
  const float* xp = xc.data_ptr<float>();
  const uint16_t* wp = reinterpret_cast<const uint16_t*>(wc.data_ptr<at::BFloat16>());
  float* yp = y.data_ptr<float>();
  const float* bp = nullptr;
  at::Tensor bc;
  if (bias.has_value() && bias->defined()) { bc = bias->contiguous().to(at::kFloat); bp = bc.data_ptr<float>(); }
  at::parallel_for(0, (N + 3) / 4, 4, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t n = b * 4;
      const int64_t c = N - n < 4 ? N - n : 4;
      const uint16_t* wr = wp + n * K;
      float* yr = yp + n;
      switch (c) {
        case 4: rows<4>(xp, wr, M, K, yr, N); break;
        case 3: rows<3>(xp, wr, M, K, yr, N); break;
        case 2: rows<2>(xp, wr, M, K, yr, N); break;
        default: rows<1>(xp, wr, M, K, yr, N); break;
      }
      if (bp) for (int64_t m = 0; m < M; ++m) for (int64_t j = 0; j < c; ++j) yr[m * N + j] += bp[n + j];
    }
  });
  return y;
}
"""


@cache
def kernel() -> Any | None:
    """The compiled op ``linear_bf16w(x, w, bias)``, or None where it cannot be built or run.
    ``AUDIOCPP_BF16_LINEAR=0`` disables it."""
    if jit.disabled("AUDIOCPP_BF16_LINEAR") or not jit.torch_has_avx512():
        return None
    module = jit.build("audiocpp_bf16_linear_v2", _SOURCE, ["linear_bf16w"], cpu_flags_needed=("avx512f", "avx512bw"),
                       cflags=["-mavx512f", "-mavx512bw"])
    if module is None:
        return None
    op = module.linear_bf16w
    x, w = torch.randn(3, 40), torch.randn(5, 40).to(torch.bfloat16)
    return op if torch.allclose(op(x, w, None), x @ w.float().t(), atol=1e-4) else None


#: Above this many rows the weights are widened and torch's GEMM does the work.
KERNEL_MAX_ROWS = 1024


class BF16WeightLinear(nn.Module):
    """``y = x W^T + b`` in float32 with ``W`` held in bfloat16 (inference only); inputs of more
    than :data:`KERNEL_MAX_ROWS` rows widen ``W`` for the call and use torch's GEMM."""

    def __init__(self, linear: nn.Linear, op: Any) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight_bf16 = linear.weight.detach().to(torch.bfloat16).contiguous()
        self.bias = None if linear.bias is None else linear.bias.detach().to(torch.float32).clone()
        self._op = op

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        rows = x.reshape(-1, shape[-1])
        if rows.shape[0] > KERNEL_MAX_ROWS or x.dtype != torch.float32:
            return torch.nn.functional.linear(x, self.weight_bf16.to(x.dtype), self.bias)
        return self._op(rows, self.weight_bf16, self.bias).reshape(*shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, weights=bfloat16, compute=float32"


def exactly_bf16(weight: torch.Tensor) -> bool:
    return weight.dtype == torch.float32 and torch.equal(weight, weight.to(torch.bfloat16).to(torch.float32))


def convert_linears(module: nn.Module) -> int:
    """Replace the float32 CPU ``nn.Linear`` layers under ``module`` whose weights are exactly
    bfloat16 values by :class:`BF16WeightLinear`; returns how many (0 without the kernel)."""
    op = kernel()
    if op is None:
        return 0
    count = 0
    for name, child in list(module.named_children()):
        if isinstance(child, nn.Linear):
            w = child.weight
            if w.device.type == "cpu" and exactly_bf16(w):
                setattr(module, name, BF16WeightLinear(child, op))
                count += 1
        else:
            count += convert_linears(child)
    return count
