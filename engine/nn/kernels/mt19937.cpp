// torch's CPU generator (MT19937, ATen/core/MT19937RNGEngine.h) advanced by `total` draws, keeping
// only the uniforms at `positions`, for engine/nn/rng.py. A draw is torch's: `if (--left == 0)
// twist; y = temper(state[next++])`, and its float32 uniform is (y & (2^24 - 1)) * 2^-24, as
// torch.rand computes it (16-bit dtypes round that value; the caller does). Only the kept draws are
// tempered; the twist runs over whole blocks of 624 words, 16 at a time.
// The state is the byte layout of Generator.get_state() (CPUGeneratorImplState): seed u64, left i32,
// seeded i32, next u64, state u64[624], then the normal-sampling cache (copied through unchanged).

#include <torch/extension.h>
#include <immintrin.h>
#include <cstring>

static constexpr int N = 624, M = 397;
static constexpr uint32_t MATRIX_A = 0x9908b0dfu, UPPER = 0x80000000u, LOWER = 0x7fffffffu;
static constexpr int64_t STATE_BYTES = 5056, LEFT_AT = 8, NEXT_AT = 16, WORDS_AT = 24;

static inline uint32_t twist1(uint32_t u, uint32_t v) {
  return (((u & UPPER) | (v & LOWER)) >> 1) ^ ((v & 1u) ? MATRIX_A : 0u);
}

static inline __m512i twist16(__m512i u, __m512i v) {
  __m512i mixed = _mm512_or_si512(_mm512_and_si512(u, _mm512_set1_epi32((int)UPPER)),
                                  _mm512_and_si512(v, _mm512_set1_epi32((int)LOWER)));
  __mmask16 odd = _mm512_test_epi32_mask(v, _mm512_set1_epi32(1));
  return _mm512_mask_xor_epi32(_mm512_srli_epi32(mixed, 1), odd, _mm512_srli_epi32(mixed, 1),
                               _mm512_set1_epi32((int)MATRIX_A));
}

// torch's next_state(): p[i] = p[i + M] ^ twist(p[i], p[i + 1]) (indices mod N, in order)
static void next_state(uint32_t* p) {
  int i = 0;
  for (; i + 16 <= N - M; i += 16) {  // reads p[i + M] (not yet rewritten) and p[i + 1]
    __m512i a = _mm512_loadu_si512(p + i), b = _mm512_loadu_si512(p + i + 1), c = _mm512_loadu_si512(p + i + M);
    _mm512_storeu_si512(p + i, _mm512_xor_si512(c, twist16(a, b)));
  }
  for (; i < N - M; ++i) p[i] = p[i + M] ^ twist1(p[i], p[i + 1]);
  for (; i + 16 <= N - 1; i += 16) {  // reads p[i + M - N], rewritten at least 227 words before
    __m512i a = _mm512_loadu_si512(p + i), b = _mm512_loadu_si512(p + i + 1), c = _mm512_loadu_si512(p + i + M - N);
    _mm512_storeu_si512(p + i, _mm512_xor_si512(c, twist16(a, b)));
  }
  for (; i < N - 1; ++i) p[i] = p[i + M - N] ^ twist1(p[i], p[i + 1]);
  p[N - 1] = p[M - 1] ^ twist1(p[N - 1], p[0]);
}

static inline uint32_t temper(uint32_t y) {
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= (y >> 18);
  return y;
}

// (uniforms at positions [float32], the state after `total` draws)
std::vector<torch::Tensor> uniform_at(torch::Tensor state, int64_t total, torch::Tensor positions) {
  TORCH_CHECK(state.scalar_type() == torch::kUInt8 && state.numel() == STATE_BYTES && state.is_contiguous(),
              "state: a CPU generator's get_state()");
  TORCH_CHECK(positions.scalar_type() == torch::kInt64 && positions.dim() == 1, "positions: int64, sorted");
  TORCH_CHECK(total >= 0, "a negative number of draws");
  auto out_state = state.clone();
  uint8_t* raw = out_state.data_ptr<uint8_t>();
  int32_t left; uint64_t next;
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
  float* v = values.data_ptr<float>();
  const uint32_t mask = (1u << 24) - 1u;
  const float scale = 1.0f / (float)(1u << 24);
  int64_t d = 0, k = 0;
  while (d < total) {
    if (left == 1) {  // this draw twists: the block's first word
      next_state(words);
      left = N; next = 0;
      if (k < count && want[k] == d) v[k++] = (float)(temper(words[0]) & mask) * scale;
      next = 1; ++d;
      continue;
    }
    const int64_t run = std::min<int64_t>(left - 1, total - d);  // draws before the next twist
    while (k < count && want[k] < d + run) {
      v[k] = (float)(temper(words[next + (want[k] - d)]) & mask) * scale;
      ++k;
    }
    next += run; left -= (int32_t)run; d += run;
  }
  std::memcpy(raw + LEFT_AT, &left, 4);
  std::memcpy(raw + NEXT_AT, &next, 8);
  for (int i = 0; i < N; ++i) { uint64_t w = words[i]; std::memcpy(raw + WORDS_AT + 8 * i, &w, 8); }
  return {values, out_state};
}
