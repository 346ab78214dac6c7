// The bfloat16-weight float32 linear of engine/nn/bf16_linear.py: weights widened to float32 as they
// multiply, FMA in float32. Compiled by engine.nn.jit with the instruction sets of bf16_linear.ISA; the
// Python bindings of the functions bf16_linear.KERNEL names are generated at build time.

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
