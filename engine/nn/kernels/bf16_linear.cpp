// The bfloat16-weight float32 linear of engine/nn/linear/bf16_linear.py: weights widened to float32 as they
// multiply, FMA in float32. One source for every ISA level (isa.h). Every level computes each output
// the same way, so every level gives the portable code's bits: 16 running sums, sum j taking the
// products of inputs k = j (mod 16) in order by fused multiply-adds; then the 16 sums reduced as
// AVX-512's reduce-add does (lane j + lane j + 8, then + 4, + 2, + 1); then the inputs past the last
// whole 16 by fused multiply-adds, in order.

#include "isa.h"

namespace audiocpp {
namespace bf16w {

// the 16 running sums reduced in AVX-512's reduce-add order
inline float sum16(const float* a) {
  float s8[8], s4[4];
  for (int j = 0; j < 8; ++j) s8[j] = a[j] + a[j + 8];
  for (int j = 0; j < 4; ++j) s4[j] = s8[j] + s8[j + 4];
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

// 16 float lanes
#if defined(AUDIOCPP_AVX512)
struct V16 {
  __m512 v;
  static V16 zero() { return {_mm512_setzero_ps()}; }
  static V16 x(const float* p) { return {_mm512_loadu_ps(p)}; }
  static V16 w(const uint16_t* p) {
    return {_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)p)), 16))};
  }
  V16 fma(const V16& a, const V16& b) const { return {_mm512_fmadd_ps(a.v, b.v, v)}; }
  float sum() const { return _mm512_reduce_add_ps(v); }  // lane j + (j + 8), + 4, + 2, + 1
};
#elif defined(AUDIOCPP_AVX2)
struct V16 {
  __m256 lo, hi;
  static V16 zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static V16 x(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  static __m256 widen(const uint16_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)p)), 16));
  }
  static V16 w(const uint16_t* p) { return {widen(p), widen(p + 8)}; }
  V16 fma(const V16& a, const V16& b) const { return {_mm256_fmadd_ps(a.lo, b.lo, lo), _mm256_fmadd_ps(a.hi, b.hi, hi)}; }
  float sum() const {
    const __m256 s8 = _mm256_add_ps(lo, hi);
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
  }
};
#elif defined(AUDIOCPP_NEON)
struct V16 {
  float32x4_t q[4];
  static V16 zero() { return {{vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)}}; }
  static V16 x(const float* p) { return {{vld1q_f32(p), vld1q_f32(p + 4), vld1q_f32(p + 8), vld1q_f32(p + 12)}}; }
  static V16 w(const uint16_t* p) {
    const uint16x8_t a = vld1q_u16(p), b = vld1q_u16(p + 8);
    return {{vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(a), 16)), vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(a), 16)),
             vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(b), 16)), vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(b), 16))}};
  }
  V16 fma(const V16& a, const V16& b) const {
    return {{vfmaq_f32(q[0], a.q[0], b.q[0]), vfmaq_f32(q[1], a.q[1], b.q[1]), vfmaq_f32(q[2], a.q[2], b.q[2]),
             vfmaq_f32(q[3], a.q[3], b.q[3])}};
  }
  float sum() const {
    const float32x4_t s4 = vaddq_f32(vaddq_f32(q[0], q[2]), vaddq_f32(q[1], q[3]));  // (j + 8) then + 4
    const float32x2_t s2 = vadd_f32(vget_low_f32(s4), vget_high_f32(s4));
    return vget_lane_f32(s2, 0) + vget_lane_f32(s2, 1);
  }
};
#else
struct V16 {
  float f[16];
  static V16 zero() { return {}; }
  static V16 x(const float* p) { V16 r; for (int j = 0; j < 16; ++j) r.f[j] = p[j]; return r; }
  static V16 w(const uint16_t* p) { V16 r; for (int j = 0; j < 16; ++j) r.f[j] = bf16_to_float(p[j]); return r; }
  V16 fma(const V16& a, const V16& b) const {
    V16 r;
    for (int j = 0; j < 16; ++j) r.f[j] = std::fma(a.f[j], b.f[j], f[j]);
    return r;
  }
  float sum() const { return sum16(f); }
};
#endif

// the portable reference of one output: the lanes, the tree, the tail
inline float dot_portable(const float* x, const uint16_t* w, int64_t K) {
  float lanes[16] = {0};
  int64_t k = 0;
  for (; k + 16 <= K; k += 16)
    for (int j = 0; j < 16; ++j) lanes[j] = std::fma(x[k + j], bf16_to_float(w[k + j]), lanes[j]);
  float s = sum16(lanes);
  for (; k < K; ++k) s = std::fma(x[k], bf16_to_float(w[k]), s);
  return s;
}

// R rows of x (stride K) against C weight rows (stride K): R x C dot products, each weight and x
// vector loaded once per 16-wide step of k
template <int R, int C>
inline void block(const float* x, const uint16_t* w, int64_t K, float* out, int64_t ldo) {
  V16 acc[R][C];
  for (int r = 0; r < R; ++r) for (int c = 0; c < C; ++c) acc[r][c] = V16::zero();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    V16 wv[C];
    for (int c = 0; c < C; ++c) wv[c] = V16::w(w + c * K + k);
    for (int r = 0; r < R; ++r) {
      const V16 xv = V16::x(x + r * K + k);
      for (int c = 0; c < C; ++c) acc[r][c] = acc[r][c].fma(xv, wv[c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      float s = acc[r][c].sum();
      for (int64_t j = k; j < K; ++j) s = std::fma(x[r * K + j], bf16_to_float(w[c * K + j]), s);
      out[r * ldo + c] = s;
    }
}

#if defined(AUDIOCPP_AVX512)
constexpr int ROWS = 4;
#else
constexpr int ROWS = 2;  // 16 ymm / 32 NEON registers: R x C x (2 or 4) accumulators
#endif

template <int C>
inline void rows(const float* x, const uint16_t* w, int64_t M, int64_t K, float* y, int64_t N) {
  int64_t m = 0;
  for (; m + ROWS <= M; m += ROWS) block<ROWS, C>(x + m * K, w, K, y + m * N, N);
  for (; m < M; ++m) block<1, C>(x + m * K, w, K, y + m * N, N);
}

// outputs [n0, n1) in blocks of 4 features for all M rows; portable: the reference code
inline void run(const float* x, const uint16_t* w, const float* bias, int64_t M, int64_t K, int64_t N,
                int64_t b0, int64_t b1, float* y, bool portable = false) {
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t n = b * 4, c = N - n < 4 ? N - n : 4;
    const uint16_t* wr = w + n * K;
    float* yr = y + n;
    if (portable) {
      for (int64_t m = 0; m < M; ++m)
        for (int64_t j = 0; j < c; ++j) yr[m * N + j] = dot_portable(x + m * K, wr + j * K, K);
    } else {
      switch (c) {
        case 4: rows<4>(x, wr, M, K, yr, N); break;
        case 3: rows<3>(x, wr, M, K, yr, N); break;
        case 2: rows<2>(x, wr, M, K, yr, N); break;
        default: rows<1>(x, wr, M, K, yr, N); break;
      }
    }
    if (bias)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t j = 0; j < c; ++j) yr[m * N + j] += bias[n + j];
  }
}

}  // namespace bf16w
}  // namespace audiocpp

#if defined(AUDIOCPP_TORCH)
#include <torch/extension.h>
#include <ATen/Parallel.h>

namespace {
at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& bias, bool portable) {
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
    audiocpp::bf16w::run(xp, wp, bp, M, K, N, b0, b1, yp, portable);
  });
  return y;
}
}  // namespace

at::Tensor linear_bf16w(const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& bias) {
  return linear(x, w, bias, false);
}

// the same with the portable code (the reference every level's code must equal bit for bit)
at::Tensor linear_bf16w_portable(const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& bias) {
  return linear(x, w, bias, true);
}

std::string variant() { return audiocpp::compiled_isa(); }
#endif
