// The Q8_0 / Q4_0 block kernel of engine/nn/q8_0_linear.py (its docstring describes the layout and the
// arithmetic). Compiled by engine.nn.jit with the instruction sets of q8_0_linear.ISA; the Python
// bindings of the functions q8_0_linear.KERNEL names are generated at build time.

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
