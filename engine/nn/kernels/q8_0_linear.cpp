// The Q8_0 / Q4_0 block kernel of engine/nn/linear/q8_0_linear.py (its docstring describes the layout and the
// arithmetic), one source for every ISA level (isa.h): the portable code is the reference, and each
// vector path computes the same integer block sums (exact) and the same float32 sequence per output,
//
//     acc = fma((float)isum[block], scale_w[block] * scale_x[block], acc)   for block = 0, 1, ...
//
// so every level gives the same bits. The torch bindings (AUDIOCPP_TORCH, set by engine.nn.kernels.jit) wrap
// the torch-free core that the C++ test (tests/kernels) also runs, natively and under qemu-aarch64.

#include "isa.h"

#include <algorithm>

namespace audiocpp {
namespace q8 {

constexpr int64_t GROUP = 16, BLOCK = 32;
constexpr float FLOAT_MAX = 3.4028234663852886e38f;

// The input quantized per block of 32: int8 values, their float32 scale d = max|x| / 127 and their
// sum (which gives back what an unsigned weight offset adds). A block holding a NaN or an infinity
// gets the scale NaN (its row's outputs become NaN, as float math would) and zero values.
struct Rows {
  const int8_t* q;
  const float* d;
  const int32_t* sum;
  int64_t K;
};

// The packed matrix: features in groups of 16; per group and block of 32 inputs, Q8_0: 8 steps of
// (16 features x 4 inputs) int8 values (512 bytes); Q4_0: 4 steps whose bytes hold the nibble of
// step s low and of step s + 4 high (256 bytes); scales: f16 bits, (groups, blocks, 16).
struct Matrix {
  const uint8_t* w;
  const uint16_t* scales;
  int64_t groups, blocks;
  int bits;
};

// How this build stores Q8_0 values: VNNI's vpdpbusd multiplies unsigned by signed bytes, so its
// builds keep q ^ 0x80 (= q + 128; the rows' block sums take the offset back) and load them as
// they are; the others keep q. Q4_0's nibbles are unsigned everywhere. A packed matrix is made and
// used by one build (one process), and its portable code reads the same layout.
#if defined(AUDIOCPP_AVX512_VNNI) || defined(AUDIOCPP_AVX_VNNI)
constexpr uint8_t Q8_STORED = 0x80;
#else
constexpr uint8_t Q8_STORED = 0;
#endif

// A block PREFETCH_BLOCKS further on in a group's stream of weights, asked for while these compute: the
// memory-bound single-row product of the 256-bit and NEON tiles keeps more reads in flight than the
// hardware prefetcher starts (the 512-bit tile's three streams of wider loads do without: it measured
// no faster, and 1 % slower in the many-row product).
constexpr int64_t PREFETCH_BLOCKS = 4;
inline void prefetch_block(const uint8_t* p, int64_t bytes) {
  for (int64_t line = 0; line < bytes; line += 64) __builtin_prefetch(p + line, 0, 3);
}

// ---- the input, per block of 32 -------------------------------------------------------------------

// scale and reciprocal of a block from its largest magnitude (finite): 1/d is dropped to 0 where it
// overflows (a subnormal block: its values quantize to 0), identically on every level
inline void block_scale(float amax, float* d, float* inverse) {
  *d = amax / 127.0f;
  const float id = amax > 0.0f ? 1.0f / *d : 0.0f;
  *inverse = id <= FLOAT_MAX ? id : 0.0f;
}

inline int8_t quantize_one(float v, float id) {  // round half to even, at most 127 in magnitude
  const float r = std::nearbyint(v * id);
  return (int8_t)std::min(127.0f, std::max(-127.0f, r));
}

inline void quantize_block_portable(const float* p, int8_t* q, float* d, int32_t* sum) {
  float amax = 0.0f;
  bool nonfinite = false;
  for (int i = 0; i < 32; ++i) {
    const float a = std::fabs(p[i]);
    if (!(a <= FLOAT_MAX)) nonfinite = true;
    else if (a > amax) amax = a;
  }
  if (nonfinite) {
    std::memset(q, 0, 32);
    *d = NAN;
    *sum = 0;
    return;
  }
  float id;
  block_scale(amax, d, &id);
  int32_t s = 0;
  for (int i = 0; i < 32; ++i) {
    q[i] = quantize_one(p[i], id);
    s += q[i];
  }
  *sum = s;
}

#if defined(AUDIOCPP_AVX512)
inline void quantize_block(const float* p, int8_t* q, float* d, int32_t* sum) {
  const __m512 a = _mm512_loadu_ps(p), b = _mm512_loadu_ps(p + 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
  if (nan || !(amax <= FLOAT_MAX)) {
    std::memset(q, 0, 32);
    *d = NAN;
    *sum = 0;
    return;
  }
  float id;
  block_scale(amax, d, &id);
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  const __m512 iv = _mm512_set1_ps(id);
  const __m512i ia = _mm512_min_epi32(hi, _mm512_max_epi32(lo, _mm512_cvtps_epi32(_mm512_mul_ps(a, iv))));
  const __m512i ib = _mm512_min_epi32(hi, _mm512_max_epi32(lo, _mm512_cvtps_epi32(_mm512_mul_ps(b, iv))));
  _mm_storeu_si128((__m128i*)q, _mm512_cvtsepi32_epi8(ia));
  _mm_storeu_si128((__m128i*)(q + 16), _mm512_cvtsepi32_epi8(ib));
  *sum = _mm512_reduce_add_epi32(_mm512_add_epi32(ia, ib));
}
#elif defined(AUDIOCPP_AVX2)
inline void quantize_block(const float* p, int8_t* q, float* d, int32_t* sum) {
  __m256 v[4];
  __m256 m = _mm256_setzero_ps(), unordered = _mm256_setzero_ps();
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(p + 8 * i);
    unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(v[i], v[i], _CMP_UNORD_Q));
    m = _mm256_max_ps(m, _mm256_and_ps(v[i], abs_mask));
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float amax = _mm_cvtss_f32(m4);
  if (_mm256_movemask_ps(unordered) || !(amax <= FLOAT_MAX)) {
    std::memset(q, 0, 32);
    *d = NAN;
    *sum = 0;
    return;
  }
  float id;
  block_scale(amax, d, &id);
  const __m256 iv = _mm256_set1_ps(id);
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  __m256i r[4];
  __m256i total = _mm256_setzero_si256();
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_min_epi32(hi, _mm256_max_epi32(lo, _mm256_cvtps_epi32(_mm256_mul_ps(v[i], iv))));
    total = _mm256_add_epi32(total, r[i]);
  }
  // int32 -> int8 in order: packs interleave 128-bit lanes, the permute puts them back
  const __m256i w01 = _mm256_packs_epi32(r[0], r[1]), w23 = _mm256_packs_epi32(r[2], r[3]);
  const __m256i b = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w01, w23),
                                                _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256((__m256i*)q, b);
  __m128i t = _mm_add_epi32(_mm256_castsi256_si128(total), _mm256_extracti128_si256(total, 1));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
  *sum = _mm_cvtsi128_si32(t);
}
#elif defined(AUDIOCPP_NEON)
inline void quantize_block(const float* p, int8_t* q, float* d, int32_t* sum) {
  float32x4_t v[8];
  float32x4_t m = vdupq_n_f32(0.0f);
  uint32x4_t ordered = vdupq_n_u32(0xffffffffu);
  for (int i = 0; i < 8; ++i) {
    v[i] = vld1q_f32(p + 4 * i);
    ordered = vandq_u32(ordered, vceqq_f32(v[i], v[i]));
    m = vmaxq_f32(m, vabsq_f32(v[i]));
  }
  const float amax = vmaxvq_f32(m);
  if (vminvq_u32(ordered) == 0 || !(amax <= FLOAT_MAX)) {
    std::memset(q, 0, 32);
    *d = NAN;
    *sum = 0;
    return;
  }
  float id;
  block_scale(amax, d, &id);
  const float32x4_t iv = vdupq_n_f32(id);
  int32x4_t total = vdupq_n_s32(0);
  int32x4_t r[8];
  for (int i = 0; i < 8; ++i) {
    r[i] = vminq_s32(vdupq_n_s32(127), vmaxq_s32(vdupq_n_s32(-127), vcvtnq_s32_f32(vmulq_f32(v[i], iv))));
    total = vaddq_s32(total, r[i]);
  }
  for (int i = 0; i < 8; i += 2) {
    const int16x8_t h = vcombine_s16(vmovn_s32(r[i]), vmovn_s32(r[i + 1]));
    vst1_s8(q + 4 * i, vmovn_s16(h));
  }
  *sum = vaddvq_s32(total);
}
#else
inline void quantize_block(const float* p, int8_t* q, float* d, int32_t* sum) {
  quantize_block_portable(p, q, d, sum);
}
#endif

// rows [m0, m1) of x [M, K]
inline void quantize_rows(const float* x, int64_t K, int64_t m0, int64_t m1, int8_t* xq, float* xs,
                          int32_t* xsum, bool portable = false) {
  const int64_t KB = K / BLOCK;
  for (int64_t m = m0; m < m1; ++m)
    for (int64_t kb = 0; kb < KB; ++kb) {
      const float* p = x + m * K + kb * BLOCK;
      int8_t* q = xq + m * K + kb * BLOCK;
      if (portable) quantize_block_portable(p, q, xs + m * KB + kb, xsum + m * KB + kb);
      else quantize_block(p, q, xs + m * KB + kb, xsum + m * KB + kb);
    }
}

// ---- the portable block product: the reference of every level ------------------------------------

// y[m, g * 16 + c] for rows [m0, m1) and one group g
inline void group_portable(const Rows& x, const Matrix& W, int64_t m0, int64_t m1, int64_t g, float* y,
                           int64_t ldy) {
  const int64_t KB = W.blocks, K = x.K;
  const int64_t bytes = W.bits == 8 ? 512 : 256;
  for (int64_t m = m0; m < m1; ++m) {
    float acc[GROUP] = {0};
    for (int64_t kb = 0; kb < KB; ++kb) {
      const uint8_t* wb = W.w + (g * KB + kb) * bytes;
      const int8_t* xb = x.q + m * K + kb * BLOCK;
      int32_t s[GROUP] = {0};
      if (W.bits == 8) {
        for (int step = 0; step < 8; ++step)
          for (int c = 0; c < GROUP; ++c)
            for (int i = 0; i < 4; ++i)
              s[c] += (int32_t)(int8_t)(wb[step * 64 + c * 4 + i] ^ Q8_STORED) * xb[step * 4 + i];
      } else {
        for (int step = 0; step < 4; ++step)
          for (int c = 0; c < GROUP; ++c)
            for (int i = 0; i < 4; ++i) {
              const uint8_t byte = wb[step * 64 + c * 4 + i];
              s[c] += ((int32_t)(byte & 15) - 8) * xb[step * 4 + i] + ((int32_t)(byte >> 4) - 8) * xb[(step + 4) * 4 + i];
            }
      }
      const float d = x.d[m * KB + kb];
      const uint16_t* sc = W.scales + (g * KB + kb) * GROUP;
      for (int c = 0; c < GROUP; ++c) acc[c] = std::fma((float)s[c], half_to_float(sc[c]) * d, acc[c]);
    }
    for (int c = 0; c < GROUP; ++c) y[m * ldy + g * GROUP + c] = acc[c];
  }
}

// ---- vector paths ----------------------------------------------------------------------------------

#if defined(AUDIOCPP_AVX512_VNNI)
constexpr int TILE_ROWS = 4, TILE_GROUPS = 3, FEW_ROWS = 0;

inline __m512i broadcast4(const int8_t* p) {
  int32_t four;
  std::memcpy(&four, p, 4);
  return _mm512_set1_epi32(four);
}

// R rows x V groups of 16 features over all of K. Q8_0 values are stored unsigned (Q8_STORED: w + 128)
// for vpdpbusd, the rows' block sums take the offset back; Q4_0 nibbles are unsigned already (offset 8).
template <int R, int V, int BITS>
inline void tile(const Rows& x, const Matrix& W, int64_t m, int64_t g0, float* y, int64_t ldy) {
  constexpr int64_t BYTES = BITS == 8 ? 512 : 256;
  constexpr int32_t OFFSET = BITS == 8 ? 128 : 8;
  const int64_t KB = W.blocks, K = x.K;
  const int8_t* xq = x.q + m * K;
  __m512 acc[R][V];
  for (int r = 0; r < R; ++r) for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t kb = 0; kb < KB; ++kb) {
    __m512i sum[R][V];
    for (int r = 0; r < R; ++r) {
      const __m512i offset = _mm512_set1_epi32(-OFFSET * x.sum[(m + r) * KB + kb]);
      for (int v = 0; v < V; ++v) sum[r][v] = offset;
    }
    const uint8_t* wb[V];
    for (int v = 0; v < V; ++v) wb[v] = W.w + ((g0 + v) * KB + kb) * BYTES;
    const int8_t* xb = xq + kb * 32;
    if constexpr (BITS == 8) {
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) {
        __m512i b[V];
        for (int v = 0; v < V; ++v) b[v] = _mm512_loadu_si512((const void*)(wb[v] + s * 64));
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
          raw[v] = _mm512_loadu_si512((const void*)(wb[v] + s * 64));
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
    for (int v = 0; v < V; ++v)
      ws[v] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(W.scales + ((g0 + v) * KB + kb) * 16)));
    for (int r = 0; r < R; ++r) {
      const __m512 d = _mm512_set1_ps(x.d[(m + r) * KB + kb]);
      for (int v = 0; v < V; ++v)
        acc[r][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[r][v]), _mm512_mul_ps(ws[v], d), acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(y + (m + r) * ldy + (g0 + v) * 16, acc[r][v]);
}
#elif defined(AUDIOCPP_AVX2)
// groups of a task: 2, taken together by one or two rows (more streams of weights in flight for the
// memory-bound GEMV), one at a time by more rows (registers); rows per tile as measured fastest
// (tools/bench_kernels.py: AVX2 5 rows 252 GFLOP/s against 220 for 6; AVX-VNNI 6 rows)
#if defined(AUDIOCPP_AVX_VNNI)
constexpr int TILE_ROWS = 6, TILE_GROUPS = 2, FEW_ROWS = 2;
#else
constexpr int TILE_ROWS = 5, TILE_GROUPS = 2, FEW_ROWS = 2;
#endif

inline __m256i broadcast4(const int8_t* p) {
  int32_t four;
  std::memcpy(&four, p, 4);
  return _mm256_set1_epi32(four);
}

// one step's 4 inputs times 8 features (32 bytes) added to the int32 sums. AVX-VNNI: vpdpbusd with
// unsigned weights (Q8_0: w ^ 0x80, the offset taken back by the block sums; Q4_0: the nibbles).
// AVX2: vpmaddubsw on |w| and x with w's sign (pairs of at most 2 * 128 * 127: no saturation, since
// the rows are quantized to -127..127), widened by vpmaddwd; Q4_0's nibbles are unsigned already.
#if defined(AUDIOCPP_AVX_VNNI)
struct Weights8 {  // stored unsigned already (Q8_STORED)
  __m256i u;
  Weights8() = default;
  explicit Weights8(__m256i w) : u(w) {}
  __m256i dot(__m256i sum, __m256i a) const { return _mm256_dpbusd_avx_epi32(sum, u, a); }
};
inline __m256i dot_unsigned(__m256i sum, __m256i u, __m256i a) { return _mm256_dpbusd_avx_epi32(sum, u, a); }
constexpr int32_t Q8_OFFSET = 128;
#else
struct Weights8 {
  __m256i w, magnitude;
  Weights8() = default;
  explicit Weights8(__m256i v) : w(v), magnitude(_mm256_sign_epi8(v, v)) {}
  __m256i dot(__m256i sum, __m256i a) const {
    const __m256i pairs = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(a, w));
    return _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
};
inline __m256i dot_unsigned(__m256i sum, __m256i u, __m256i a) {
  return _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1)));
}
constexpr int32_t Q8_OFFSET = 0;
#endif

// R rows x V groups; a group's 16 features are two halves of 8 (bytes 0-31 and 32-63 of a step)
template <int R, int V, int BITS>
inline void tile(const Rows& x, const Matrix& W, int64_t m, int64_t g0, float* y, int64_t ldy) {
  constexpr int64_t BYTES = BITS == 8 ? 512 : 256;
  constexpr int32_t OFFSET = BITS == 8 ? Q8_OFFSET : 8;
  constexpr int H = 2 * V;
  const int64_t KB = W.blocks, K = x.K;
  const int8_t* xq = x.q + m * K;
  __m256 acc[R][H];
  for (int r = 0; r < R; ++r) for (int h = 0; h < H; ++h) acc[r][h] = _mm256_setzero_ps();
  for (int64_t kb = 0; kb < KB; ++kb) {
    __m256i sum[R][H];
    for (int r = 0; r < R; ++r) {
      const __m256i offset = _mm256_set1_epi32(-OFFSET * x.sum[(m + r) * KB + kb]);
      for (int h = 0; h < H; ++h) sum[r][h] = offset;
    }
    const uint8_t* wb[V];
    for (int v = 0; v < V; ++v) wb[v] = W.w + ((g0 + v) * KB + kb) * BYTES;
    const int8_t* xb = xq + kb * 32;
    for (int v = 0; v < V; ++v) prefetch_block(wb[v] + PREFETCH_BLOCKS * BYTES, BYTES);
    if constexpr (BITS == 8) {
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) {
        Weights8 b[H];
        for (int h = 0; h < H; ++h)
          b[h] = Weights8(_mm256_loadu_si256((const __m256i*)(wb[h / 2] + s * 64 + (h % 2) * 32)));
        for (int r = 0; r < R; ++r) {
          const __m256i a = broadcast4(xb + r * K + s * 4);
          for (int h = 0; h < H; ++h) sum[r][h] = b[h].dot(sum[r][h], a);
        }
      }
    } else {
      const __m256i low = _mm256_set1_epi8(15);
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        __m256i raw[H], b[H];
        for (int h = 0; h < H; ++h) {
          raw[h] = _mm256_loadu_si256((const __m256i*)(wb[h / 2] + s * 64 + (h % 2) * 32));
          b[h] = _mm256_and_si256(raw[h], low);
        }
        for (int r = 0; r < R; ++r) {
          const __m256i a = broadcast4(xb + r * K + s * 4);
          for (int h = 0; h < H; ++h) sum[r][h] = dot_unsigned(sum[r][h], b[h], a);
        }
        for (int h = 0; h < H; ++h) b[h] = _mm256_and_si256(_mm256_srli_epi16(raw[h], 4), low);
        for (int r = 0; r < R; ++r) {
          const __m256i a = broadcast4(xb + r * K + (s + 4) * 4);
          for (int h = 0; h < H; ++h) sum[r][h] = dot_unsigned(sum[r][h], b[h], a);
        }
      }
    }
    __m256 ws[H];
    for (int h = 0; h < H; ++h)
      ws[h] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(W.scales + ((g0 + h / 2) * KB + kb) * 16 + (h % 2) * 8)));
    for (int r = 0; r < R; ++r) {
      const __m256 d = _mm256_set1_ps(x.d[(m + r) * KB + kb]);
      for (int h = 0; h < H; ++h)
        acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[r][h]), _mm256_mul_ps(ws[h], d), acc[r][h]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < H; ++h) _mm256_storeu_ps(y + (m + r) * ldy + (g0 + h / 2) * 16 + (h % 2) * 8, acc[r][h]);
}
#elif defined(AUDIOCPP_NEON)
constexpr int TILE_ROWS = 4, TILE_GROUPS = 2, FEW_ROWS = 2;

inline int8x16_t broadcast4(const int8_t* p) {
  int32_t four;
  std::memcpy(&four, p, 4);
  return vreinterpretq_s8_s32(vdupq_n_s32(four));
}

// 16 bytes of one step (4 features x 4 inputs) times the step's 4 inputs, added to the features' sums
#if defined(AUDIOCPP_NEON_DOTPROD)
struct Sums {
  int32x4_t s;
  void init(int32_t offset) { s = vdupq_n_s32(offset); }
  void add(int8x16_t w, int8x16_t a) { s = vdotq_s32(s, w, a); }
  int32x4_t total() const { return s; }
};
#else
struct Sums {  // pairs of products widened (s8 x s8 fits s16), pair sums kept per feature and half
  int32x4_t lo, hi;
  int32_t offset;
  void init(int32_t o) { lo = hi = vdupq_n_s32(0); offset = o; }
  void add(int8x16_t w, int8x16_t a) {
    lo = vpadalq_s16(lo, vmull_s8(vget_low_s8(w), vget_low_s8(a)));
    hi = vpadalq_s16(hi, vmull_high_s8(w, a));
  }
  int32x4_t total() const { return vaddq_s32(vpaddq_s32(lo, hi), vdupq_n_s32(offset)); }
};
#endif

// R rows x V groups; a group's 16 features are four quarters of 4 (16 bytes of a 64-byte step)
template <int R, int V, int BITS>
inline void tile(const Rows& x, const Matrix& W, int64_t m, int64_t g0, float* y, int64_t ldy) {
  constexpr int64_t BYTES = BITS == 8 ? 512 : 256;
  constexpr int32_t OFFSET = BITS == 8 ? 0 : 8;
  constexpr int Q = 4 * V;
  const int64_t KB = W.blocks, K = x.K;
  const int8_t* xq = x.q + m * K;
  float32x4_t acc[R][Q];
  for (int r = 0; r < R; ++r) for (int j = 0; j < Q; ++j) acc[r][j] = vdupq_n_f32(0.0f);
  for (int64_t kb = 0; kb < KB; ++kb) {
    Sums sum[R][Q];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < Q; ++j) sum[r][j].init(-OFFSET * x.sum[(m + r) * KB + kb]);
    for (int v = 0; v < V; ++v) prefetch_block(W.w + ((g0 + v) * KB + kb + PREFETCH_BLOCKS) * BYTES, BYTES);
    const int8_t* xb = xq + kb * 32;
    if constexpr (BITS == 8) {
      for (int s = 0; s < 8; ++s) {
        int8x16_t b[Q];
        for (int j = 0; j < Q; ++j)
          b[j] = vld1q_s8((const int8_t*)(W.w + ((g0 + j / 4) * KB + kb) * BYTES + s * 64 + (j % 4) * 16));
        for (int r = 0; r < R; ++r) {
          const int8x16_t a = broadcast4(xb + r * K + s * 4);
          for (int j = 0; j < Q; ++j) sum[r][j].add(b[j], a);
        }
      }
    } else {
      const uint8x16_t low = vdupq_n_u8(15);
      for (int s = 0; s < 4; ++s) {
        uint8x16_t raw[Q];
        for (int j = 0; j < Q; ++j)
          raw[j] = vld1q_u8(W.w + ((g0 + j / 4) * KB + kb) * BYTES + s * 64 + (j % 4) * 16);
        for (int r = 0; r < R; ++r) {
          const int8x16_t a = broadcast4(xb + r * K + s * 4), a4 = broadcast4(xb + r * K + (s + 4) * 4);
          for (int j = 0; j < Q; ++j) {
            sum[r][j].add(vreinterpretq_s8_u8(vandq_u8(raw[j], low)), a);
            sum[r][j].add(vreinterpretq_s8_u8(vshrq_n_u8(raw[j], 4)), a4);
          }
        }
      }
    }
    float32x4_t ws[Q];
    for (int j = 0; j < Q; ++j)
      ws[j] = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(W.scales + ((g0 + j / 4) * KB + kb) * 16 + (j % 4) * 4)));
    for (int r = 0; r < R; ++r) {
      const float32x4_t d = vdupq_n_f32(x.d[(m + r) * KB + kb]);
      for (int j = 0; j < Q; ++j)
        acc[r][j] = vfmaq_f32(acc[r][j], vcvtq_f32_s32(sum[r][j].total()), vmulq_f32(ws[j], d));
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < Q; ++j) vst1q_f32(y + (m + r) * ldy + (g0 + j / 4) * 16 + (j % 4) * 4, acc[r][j]);
}
#endif

#if defined(AUDIOCPP_AVX512_VNNI) || defined(AUDIOCPP_AVX2) || defined(AUDIOCPP_NEON)
#define AUDIOCPP_Q8_TILES 1
// the last rows (fewer than a tile): one tile of exactly that many
template <int R, int V, int BITS>
inline void rows_left(const Rows& x, const Matrix& W, int64_t left, int64_t m, int64_t g0, float* y, int64_t ldy) {
  if constexpr (R > 0) {
    if (left == R) return tile<R, V, BITS>(x, W, m, g0, y, ldy);
    rows_left<R - 1, V, BITS>(x, W, left, m, g0, y, ldy);
  }
}

template <int V, int BITS>
inline void rows_tiled(const Rows& x, const Matrix& W, int64_t m0, int64_t m1, int64_t g0, float* y, int64_t ldy) {
  int64_t m = m0;
  for (; m + TILE_ROWS <= m1; m += TILE_ROWS) tile<TILE_ROWS, V, BITS>(x, W, m, g0, y, ldy);
  rows_left<TILE_ROWS - 1, V, BITS>(x, W, m1 - m, m, g0, y, ldy);
}

template <int BITS>
inline void groups_tiled(const Rows& x, const Matrix& W, int64_t m0, int64_t m1, int64_t g0, int64_t count,
                         float* y, int64_t ldy) {
  if constexpr (TILE_GROUPS >= 3) {
    if (count >= 3) return rows_tiled<3, BITS>(x, W, m0, m1, g0, y, ldy);
  }
  if constexpr (TILE_GROUPS >= 2) {
    if (count >= 2 && (FEW_ROWS == 0 || m1 - m0 <= FEW_ROWS)) return rows_tiled<2, BITS>(x, W, m0, m1, g0, y, ldy);
  }
  for (int64_t g = g0; g < g0 + count; ++g) rows_tiled<1, BITS>(x, W, m0, m1, g, y, ldy);
}
#else
constexpr int TILE_GROUPS = 1;
#endif

// ---- the work, split into tasks -------------------------------------------------------------------

// Rows per task: tasks that share a slice of features share its weights in cache.
constexpr int64_t ROWS_PER_TASK = 64;

inline int64_t group_slices(const Matrix& W) { return (W.groups + TILE_GROUPS - 1) / TILE_GROUPS; }
inline int64_t row_chunks(int64_t M) { return (M + ROWS_PER_TASK - 1) / ROWS_PER_TASK; }
inline int64_t task_count(const Matrix& W, int64_t M) { return group_slices(W) * row_chunks(M); }

// tasks [t0, t1) of y [M, groups * 16] = x W^T (x already quantized); portable: the reference code
inline void run_tasks(const Rows& x, const Matrix& W, int64_t M, int64_t t0, int64_t t1, float* y,
                      bool portable = false) {
  const int64_t chunks = row_chunks(M), ldy = W.groups * GROUP;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t g0 = (t / chunks) * TILE_GROUPS, m0 = (t % chunks) * ROWS_PER_TASK;
    const int64_t m1 = std::min(M, m0 + ROWS_PER_TASK), count = std::min<int64_t>(TILE_GROUPS, W.groups - g0);
#if defined(AUDIOCPP_Q8_TILES)
    if (!portable) {
      if (W.bits == 8) groups_tiled<8>(x, W, m0, m1, g0, count, y, ldy);
      else groups_tiled<4>(x, W, m0, m1, g0, count, y, ldy);
      continue;
    }
#endif
    for (int64_t g = g0; g < g0 + count; ++g) group_portable(x, W, m0, m1, g, y, ldy);
  }
}

// ---- packing a GGUF tensor's blocks --------------------------------------------------------------

// raw: rows x blocks x (2 + 32) bytes (Q8_0) or (2 + 16) (Q4_0), as the file stores them; groups
// [g0, g1) of 16 rows go to packed / scales (Matrix's layout). Rows past the last (a last group
// short of 16) are zeros: values and scale 0, so their outputs are 0 (the caller drops them).
inline void pack_groups(const uint8_t* raw, int64_t rows, int64_t blocks, int bits, int64_t g0, int64_t g1,
                        uint8_t* packed, uint16_t* scales) {
  const int64_t block_bytes = bits == 8 ? 34 : 18, out_bytes = bits == 8 ? 512 : 256, steps = bits == 8 ? 8 : 4;
  // Q4_0's zero is the nibble 8 (value = nibble - 8): a padding row of 0x88 bytes
  const uint8_t z = bits == 8 ? Q8_STORED : (uint8_t)0x88;
  const uint8_t zero[4] = {z, z, z, z};
  for (int64_t g = g0; g < g1; ++g)
    for (int64_t kb = 0; kb < blocks; ++kb) {
      uint8_t* o = packed + (g * blocks + kb) * out_bytes;
      uint16_t* sc = scales + (g * blocks + kb) * GROUP;
      for (int c = 0; c < GROUP; ++c) {
        if (g * GROUP + c >= rows) {
          sc[c] = 0;
          for (int s = 0; s < steps; ++s) std::memcpy(o + s * 64 + c * 4, zero, 4);
          continue;
        }
        const uint8_t* b = raw + ((g * GROUP + c) * blocks + kb) * block_bytes;
        std::memcpy(sc + c, b, 2);
        for (int s = 0; s < steps; ++s) {
          std::memcpy(o + s * 64 + c * 4, b + 2 + s * 4, 4);
          if (bits == 8 && Q8_STORED)
            for (int i = 0; i < 4; ++i) o[s * 64 + c * 4 + i] ^= Q8_STORED;
        }
      }
    }
}

}  // namespace q8
}  // namespace audiocpp

#if defined(AUDIOCPP_TORCH)
#include <torch/extension.h>
#include <ATen/Parallel.h>

namespace {

audiocpp::q8::Matrix matrix_of(const at::Tensor& w, const at::Tensor& sc) {
  TORCH_CHECK(w.device().is_cpu() && sc.device().is_cpu(), "the Q8_0 kernel runs on the CPU");
  TORCH_CHECK(w.dim() == 3 && sc.dim() == 3 && (w.size(2) == 512 || w.size(2) == 256) && sc.size(2) == 16,
              "a packed matrix: (groups, blocks, 512 or 256) and scales (groups, blocks, 16)");
  TORCH_CHECK(w.scalar_type() == at::kByte && sc.scalar_type() == at::kShort && w.is_contiguous() && sc.is_contiguous());
  TORCH_CHECK(sc.size(0) == w.size(0) && sc.size(1) == w.size(1), "scales against the packed matrix");
  return {w.data_ptr<uint8_t>(), reinterpret_cast<const uint16_t*>(sc.data_ptr<int16_t>()), w.size(0), w.size(1),
          w.size(2) == 512 ? 8 : 4};
}

// x [M, K] times each packed matrix, sharing x's quantization and one pass of threads over every
// matrix's tasks; each output the bits of its own product
std::vector<at::Tensor> linears(const at::Tensor& x, const std::vector<at::Tensor>& ws, const std::vector<at::Tensor>& scs,
                                bool portable) {
  TORCH_CHECK(!ws.empty() && ws.size() == scs.size(), "as many scales as matrices");
  std::vector<audiocpp::q8::Matrix> Ws;
  for (size_t i = 0; i < ws.size(); ++i) {
    Ws.push_back(matrix_of(ws[i], scs[i]));
    TORCH_CHECK(Ws.back().blocks == Ws[0].blocks, "the matrices take the same inputs");
  }
  TORCH_CHECK(x.device().is_cpu() && x.dim() == 2 && x.size(1) == Ws[0].blocks * 32, "x [M, K] against the packed matrix");
  auto xf = x.to(at::kFloat).contiguous();
  const int64_t M = xf.size(0), K = xf.size(1), KB = Ws[0].blocks;
  std::vector<at::Tensor> ys;
  for (const auto& W : Ws) ys.push_back(at::empty({M, W.groups * 16}, xf.options()));
  if (M == 0) return ys;
  auto xq = at::empty({M, K}, xf.options().dtype(at::kChar));
  auto xs = at::empty({M, KB}, xf.options());
  auto xsum = at::empty({M, KB}, xf.options().dtype(at::kInt));
  const float* xp = xf.data_ptr<float>();
  at::parallel_for(0, M, 8, [&](int64_t m0, int64_t m1) {
    audiocpp::q8::quantize_rows(xp, K, m0, m1, xq.data_ptr<int8_t>(), xs.data_ptr<float>(), xsum.data_ptr<int32_t>(),
                                portable);
  });
  const audiocpp::q8::Rows rows{xq.data_ptr<int8_t>(), xs.data_ptr<float>(), xsum.data_ptr<int32_t>(), K};
  std::vector<int64_t> first{0};  // the first task of each matrix, then the total
  for (const auto& W : Ws) first.push_back(first.back() + audiocpp::q8::task_count(W, M));
  at::parallel_for(0, first.back(), 1, [&](int64_t t0, int64_t t1) {
    for (size_t i = 0; i < Ws.size(); ++i) {
      const int64_t a = std::max(t0, first[i]), b = std::min(t1, first[i + 1]);
      if (a < b) audiocpp::q8::run_tasks(rows, Ws[i], M, a - first[i], b - first[i], ys[i].data_ptr<float>(), portable);
    }
  });
  return ys;
}

}  // namespace

// x [M, K] (any float dtype) times the packed matrix -> float32 [M, groups * 16]
at::Tensor block_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& sc) {
  return linears(x, {w}, {sc}, false)[0];
}

// the same with the portable code (the reference every level's code must equal bit for bit)
at::Tensor block_linear_portable(const at::Tensor& x, const at::Tensor& w, const at::Tensor& sc) {
  return linears(x, {w}, {sc}, true)[0];
}

// x times several packed matrices of the same input size (a block's q, k and v; gate and up): one
// quantization of x, one pass of threads; each output equals block_linear's bit for bit
std::vector<at::Tensor> block_linears(const at::Tensor& x, const std::vector<at::Tensor>& ws,
                                      const std::vector<at::Tensor>& scs) {
  return linears(x, ws, scs, false);
}

// raw [rows, blocks * (2 + 32 or 16)] uint8 (a GGUF tensor's bytes) -> packed, scales (the last group
// padded with zero rows)
void pack_blocks_into(const at::Tensor& raw, int64_t bits, at::Tensor& packed, at::Tensor& scales) {
  TORCH_CHECK(bits == 8 || bits == 4, "Q8_0 (8) or Q4_0 (4)");
  TORCH_CHECK(raw.scalar_type() == at::kByte && raw.is_contiguous() && raw.dim() == 2, "raw: uint8 rows");
  const int64_t block_bytes = bits == 8 ? 34 : 18, rows = raw.size(0);
  TORCH_CHECK(raw.size(1) % block_bytes == 0, "whole blocks");
  const int64_t blocks = raw.size(1) / block_bytes, groups = (rows + 15) / 16;
  TORCH_CHECK(packed.scalar_type() == at::kByte && packed.is_contiguous() && packed.numel() == groups * blocks * (bits == 8 ? 512 : 256));
  TORCH_CHECK(scales.scalar_type() == at::kShort && scales.is_contiguous() && scales.numel() == groups * blocks * 16);
  const uint8_t* src = raw.data_ptr<uint8_t>();
  uint8_t* dst = packed.data_ptr<uint8_t>();
  uint16_t* sc = reinterpret_cast<uint16_t*>(scales.data_ptr<int16_t>());
  at::parallel_for(0, groups, 4, [&](int64_t g0, int64_t g1) {
    audiocpp::q8::pack_groups(src, rows, blocks, (int)bits, g0, g1, dst, sc);
  });
}

std::string variant() { return audiocpp::compiled_isa(); }

// the byte this build adds to stored Q8_0 values (0x80 for VNNI builds: q ^ 0x80 = q + 128)
int64_t q8_stored_offset() { return audiocpp::q8::Q8_STORED; }
#endif
