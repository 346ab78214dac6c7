// torch's CPU generator (MT19937, ATen/core/MT19937RNGEngine.h) advanced by `total` draws, keeping
// only the uniforms at `positions`, for engine/nn/kernels/rng.py. A draw is torch's: `if (--left == 0)
// twist; y = temper(state[next++])`, and its float32 uniform is (y & (2^24 - 1)) * 2^-24, as
// torch.rand computes it (16-bit dtypes round that value; the caller does). Only the kept draws are
// tempered; the twist runs over whole blocks of 624 words, a vector of words at a time (16 on
// AVX-512, 8 on AVX2, 4 on NEON, 1 in the portable code: integer operations, the same words on
// every ISA level, isa.h).
// The state is the byte layout of Generator.get_state() (CPUGeneratorImplState): seed u64, left i32,
// seeded i32, next u64, state u64[624], then the normal-sampling cache (copied through unchanged).

#include "isa.h"

#include <algorithm>

namespace audiocpp {
namespace mt {

constexpr int N = 624, M = 397;
constexpr uint32_t MATRIX_A = 0x9908b0dfu, UPPER = 0x80000000u, LOWER = 0x7fffffffu;
constexpr int64_t STATE_BYTES = 5056, LEFT_AT = 8, NEXT_AT = 16, WORDS_AT = 24;

inline uint32_t twist1(uint32_t u, uint32_t v) {
  return (((u & UPPER) | (v & LOWER)) >> 1) ^ ((v & 1u) ? MATRIX_A : 0u);
}

// p[i] = p[i + off] ^ twist(p[i], p[i + 1]) for i in [from, to), `width` words at a time where the
// vector code is compiled (the words read are not rewritten within a vector: off >= width or < 0)
#if defined(AUDIOCPP_AVX512)
constexpr int WIDTH = 16;
inline void twist_run(uint32_t* p, int from, int to, int off) {
  const __m512i upper = _mm512_set1_epi32((int)UPPER), lower = _mm512_set1_epi32((int)LOWER);
  const __m512i one = _mm512_set1_epi32(1), matrix = _mm512_set1_epi32((int)MATRIX_A);
  int i = from;
  for (; i + WIDTH <= to; i += WIDTH) {
    const __m512i u = _mm512_loadu_si512(p + i), v = _mm512_loadu_si512(p + i + 1), c = _mm512_loadu_si512(p + i + off);
    const __m512i mixed = _mm512_srli_epi32(_mm512_or_si512(_mm512_and_si512(u, upper), _mm512_and_si512(v, lower)), 1);
    const __mmask16 odd = _mm512_test_epi32_mask(v, one);
    _mm512_storeu_si512(p + i, _mm512_xor_si512(c, _mm512_mask_xor_epi32(mixed, odd, mixed, matrix)));
  }
  for (; i < to; ++i) p[i] = p[i + off] ^ twist1(p[i], p[i + 1]);
}
#elif defined(AUDIOCPP_AVX2)
constexpr int WIDTH = 8;
inline void twist_run(uint32_t* p, int from, int to, int off) {
  const __m256i upper = _mm256_set1_epi32((int)UPPER), lower = _mm256_set1_epi32((int)LOWER);
  const __m256i one = _mm256_set1_epi32(1), matrix = _mm256_set1_epi32((int)MATRIX_A);
  int i = from;
  for (; i + WIDTH <= to; i += WIDTH) {
    const __m256i u = _mm256_loadu_si256((const __m256i*)(p + i)), v = _mm256_loadu_si256((const __m256i*)(p + i + 1));
    const __m256i c = _mm256_loadu_si256((const __m256i*)(p + i + off));
    const __m256i mixed = _mm256_srli_epi32(_mm256_or_si256(_mm256_and_si256(u, upper), _mm256_and_si256(v, lower)), 1);
    const __m256i odd = _mm256_cmpeq_epi32(_mm256_and_si256(v, one), one);
    _mm256_storeu_si256((__m256i*)(p + i), _mm256_xor_si256(c, _mm256_xor_si256(mixed, _mm256_and_si256(odd, matrix))));
  }
  for (; i < to; ++i) p[i] = p[i + off] ^ twist1(p[i], p[i + 1]);
}
#elif defined(AUDIOCPP_NEON)
constexpr int WIDTH = 4;
inline void twist_run(uint32_t* p, int from, int to, int off) {
  const uint32x4_t upper = vdupq_n_u32(UPPER), lower = vdupq_n_u32(LOWER), matrix = vdupq_n_u32(MATRIX_A);
  int i = from;
  for (; i + WIDTH <= to; i += WIDTH) {
    const uint32x4_t u = vld1q_u32(p + i), v = vld1q_u32(p + i + 1), c = vld1q_u32(p + i + off);
    const uint32x4_t mixed = vshrq_n_u32(vorrq_u32(vandq_u32(u, upper), vandq_u32(v, lower)), 1);
    const uint32x4_t odd = vtstq_u32(v, vdupq_n_u32(1));
    vst1q_u32(p + i, veorq_u32(c, veorq_u32(mixed, vandq_u32(odd, matrix))));
  }
  for (; i < to; ++i) p[i] = p[i + off] ^ twist1(p[i], p[i + 1]);
}
#else
constexpr int WIDTH = 1;
inline void twist_run(uint32_t* p, int from, int to, int off) {
  for (int i = from; i < to; ++i) p[i] = p[i + off] ^ twist1(p[i], p[i + 1]);
}
#endif

// torch's next_state(): p[i] = p[i + M] ^ twist(p[i], p[i + 1]) (indices mod N, in order)
inline void next_state(uint32_t* p, bool portable = false) {
  if (portable) {
    for (int i = 0; i < N - M; ++i) p[i] = p[i + M] ^ twist1(p[i], p[i + 1]);
    for (int i = N - M; i < N - 1; ++i) p[i] = p[i + M - N] ^ twist1(p[i], p[i + 1]);
  } else {
    twist_run(p, 0, N - M, M);          // reads p[i + M] (not yet rewritten) and p[i + 1]
    twist_run(p, N - M, N - 1, M - N);  // reads p[i + M - N], rewritten at least 227 words before
  }
  p[N - 1] = p[M - 1] ^ twist1(p[N - 1], p[0]);
}

inline uint32_t temper(uint32_t y) {
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= (y >> 18);
  return y;
}

// the generator's words, left and next advanced by `total` draws; values[k] = the uniform of draw
// want[k] (increasing, < total)
inline void advance(uint32_t* words, int32_t& left, uint64_t& next, int64_t total, const int64_t* want,
                    int64_t count, float* values, bool portable = false) {
  const uint32_t mask = (1u << 24) - 1u;
  const float scale = 1.0f / (float)(1u << 24);
  int64_t d = 0, k = 0;
  while (d < total) {
    if (left == 1) {  // this draw twists: the block's first word
      next_state(words, portable);
      left = N;
      if (k < count && want[k] == d) values[k++] = (float)(temper(words[0]) & mask) * scale;
      next = 1;
      ++d;
      continue;
    }
    const int64_t run = std::min<int64_t>(left - 1, total - d);  // draws before the next twist
    while (k < count && want[k] < d + run) {
      values[k] = (float)(temper(words[next + (want[k] - d)]) & mask) * scale;
      ++k;
    }
    next += run;
    left -= (int32_t)run;
    d += run;
  }
}

}  // namespace mt
}  // namespace audiocpp

#if defined(AUDIOCPP_TORCH)
#include <torch/extension.h>

namespace {
std::vector<torch::Tensor> draw(torch::Tensor state, int64_t total, torch::Tensor positions, bool portable) {
  using namespace audiocpp::mt;
  TORCH_CHECK(state.scalar_type() == torch::kUInt8 && state.numel() == STATE_BYTES && state.is_contiguous(),
              "state: a CPU generator's get_state()");
  TORCH_CHECK(positions.scalar_type() == torch::kInt64 && positions.dim() == 1, "positions: int64, sorted");
  TORCH_CHECK(total >= 0, "a negative number of draws");
  auto out_state = state.clone();
  uint8_t* raw = out_state.data_ptr<uint8_t>();
  int32_t left;
  uint64_t next;
  std::memcpy(&left, raw + LEFT_AT, 4);
  std::memcpy(&next, raw + NEXT_AT, 8);
  uint32_t words[N];
  for (int i = 0; i < N; ++i) { uint64_t w; std::memcpy(&w, raw + WORDS_AT + 8 * i, 8); words[i] = (uint32_t)w; }
  TORCH_CHECK(left >= 1 && left <= N && next <= (uint64_t)N, "not a CPU generator's state");
  auto pos = positions.contiguous();
  const int64_t* want = pos.data_ptr<int64_t>();
  const int64_t count = pos.numel();
  for (int64_t j = 1; j < count; ++j) TORCH_CHECK(want[j] > want[j - 1], "positions must increase");
  TORCH_CHECK(count == 0 || (want[0] >= 0 && want[count - 1] < total), "positions outside the draws");
  auto values = torch::empty({count}, torch::kFloat32);
  advance(words, left, next, total, want, count, values.data_ptr<float>(), portable);
  std::memcpy(raw + LEFT_AT, &left, 4);
  std::memcpy(raw + NEXT_AT, &next, 8);
  for (int i = 0; i < N; ++i) { uint64_t w = words[i]; std::memcpy(raw + WORDS_AT + 8 * i, &w, 8); }
  return {values, out_state};
}
}  // namespace

// (uniforms at positions [float32], the state after `total` draws)
std::vector<torch::Tensor> uniform_at(torch::Tensor state, int64_t total, torch::Tensor positions) {
  return draw(state, total, positions, false);
}

// the same with the portable code (the reference every level's code must equal bit for bit)
std::vector<torch::Tensor> uniform_at_portable(torch::Tensor state, int64_t total, torch::Tensor positions) {
  return draw(state, total, positions, true);
}

std::string variant() { return audiocpp::compiled_isa(); }
#endif
