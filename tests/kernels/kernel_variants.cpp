// The C++ kernels' own test: each kernel's vector code, as compiled for one ISA level (this file is
// built once per level, natively or for AArch64 and run under qemu-aarch64), against its portable
// code in the same binary, bit for bit; and the portable code against plain double-precision (or
// std::mt19937) arithmetic. No torch: the kernels' cores are torch-free (AUDIOCPP_TORCH unset).
// Prints "ok <compiled ISA> <checks>" and exits 0, or prints each failure and exits 1.

#include "q8_0_linear.cpp"
#include "bf16_linear.cpp"
#include "snake.cpp"
#include "mt19937.cpp"

#include <cstdio>
#include <random>
#include <vector>

namespace {

int failures = 0, checks = 0;

void expect(bool ok, const char* what, long a = 0, long b = 0) {
  ++checks;
  if (!ok && failures++ < 20) std::printf("FAIL %s (%ld, %ld)\n", what, a, b);
}

bool same_bits(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

uint16_t half_of(float f) {  // float -> IEEE half, round to nearest even (normal range only)
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const int32_t exponent = (int32_t)((bits >> 23) & 0xff) - 127 + 15;
  uint32_t mantissa = bits & 0x7fffffu;
  if (exponent <= 0) return (uint16_t)sign;
  uint32_t h = ((uint32_t)exponent << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return (uint16_t)(sign | h);
}

// ---- Q8_0 / Q4_0 ----------------------------------------------------------------------------------

void test_q8(std::mt19937& rng, int bits, int64_t M, int64_t groups, int64_t blocks, int special) {
  using namespace audiocpp::q8;
  const int64_t N = groups * 16, K = blocks * 32, block_bytes = bits == 8 ? 34 : 18;
  std::uniform_int_distribution<int> value(bits == 8 ? -128 : 0, bits == 8 ? 127 : 255);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint8_t> raw(N * blocks * block_bytes);
  std::vector<float> w(N * K);  // the values the blocks stand for, for the double check
  for (int64_t n = 0; n < N; ++n)
    for (int64_t kb = 0; kb < blocks; ++kb) {
      uint8_t* b = raw.data() + (n * blocks + kb) * block_bytes;
      const uint16_t d = half_of(0.001f + 0.01f * std::fabs(normal(rng)));
      std::memcpy(b, &d, 2);
      const float scale = audiocpp::half_to_float(d);
      for (int i = 0; i < (bits == 8 ? 32 : 16); ++i) b[2 + i] = (uint8_t)value(rng);
      for (int i = 0; i < 32; ++i) {
        const int q = bits == 8 ? (int)(int8_t)b[2 + i]
                                : (int)(i < 16 ? (b[2 + i] & 15) : (b[2 + i - 16] >> 4)) - 8;
        w[n * K + kb * 32 + i] = q * scale;
      }
    }
  std::vector<float> x(M * K);
  for (auto& v : x) v = normal(rng) * (1.0f + 10.0f * (normal(rng) > 2.0f));
  if (special == 1) {  // blocks of zeros, of subnormals, a NaN, an infinity, a huge value
    for (int64_t k = 0; k < 32 && M > 0; ++k) x[k] = 0.0f;
    if (blocks > 1) for (int64_t k = 32; k < 64; ++k) x[k] = 1e-42f * (float)(k - 40);
    if (M > 1) x[K + 5] = NAN;
    if (M > 2) x[2 * K + 40] = -INFINITY;
    if (M > 3) x[3 * K] = 1e30f;
  }
  const int64_t bytes = bits == 8 ? 512 : 256;
  std::vector<uint8_t> packed(groups * blocks * bytes);
  std::vector<uint16_t> scales(groups * blocks * 16);
  pack_groups(raw.data(), N, blocks, bits, 0, groups, packed.data(), scales.data());
  const Matrix W{packed.data(), scales.data(), groups, blocks, bits};

  std::vector<int8_t> q1(M * K), q2(M * K);
  std::vector<float> d1(M * blocks), d2(M * blocks);
  std::vector<int32_t> s1(M * blocks), s2(M * blocks);
  quantize_rows(x.data(), K, 0, M, q1.data(), d1.data(), s1.data(), false);
  quantize_rows(x.data(), K, 0, M, q2.data(), d2.data(), s2.data(), true);
  expect(std::memcmp(q1.data(), q2.data(), q1.size()) == 0, "q8: quantized rows", M, special);
  expect(std::memcmp(d1.data(), d2.data(), d1.size() * 4) == 0, "q8: row scales", M, special);
  expect(std::memcmp(s1.data(), s2.data(), s1.size() * 4) == 0, "q8: row sums", M, special);
  for (auto q : q2) expect(q >= -127 && q <= 127, "q8: quantized values within -127..127", q);

  std::vector<float> y1(M * N), y2(M * N);
  const Rows rows{q1.data(), d1.data(), s1.data(), K};
  run_tasks(rows, W, M, 0, task_count(W, M), y1.data(), false);
  run_tasks(rows, W, M, 0, task_count(W, M), y2.data(), true);
  expect(same_bits(y1.data(), y2.data(), y1.size()), "q8: vector code = portable code, bit for bit", M, N);

  // the portable code against double arithmetic on the same quantized rows
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double want = 0.0, size = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const double term = (double)q2[m * K + k] * d2[m * blocks + k / 32] * w[n * K + k];
        want += term;
        size += std::fabs(term);
      }
      const float got = y2[m * N + n];
      if (std::isnan(want)) expect(std::isnan(got), "q8: a NaN row gives NaN", m, n);
      else expect(std::fabs(got - want) <= 1e-5 * size + 1e-30, "q8: portable code against double", m, n);
    }
}

// ---- bf16-weight linear -----------------------------------------------------------------------------

void test_bf16(std::mt19937& rng, int64_t M, int64_t N, int64_t K) {
  using namespace audiocpp::bf16w;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(M * K), bias(N);
  std::vector<uint16_t> w(N * K);
  for (auto& v : x) v = normal(rng);
  for (auto& v : w) v = audiocpp::float_to_bf16(normal(rng));
  for (auto& v : bias) v = normal(rng);
  std::vector<float> y1(M * N), y2(M * N);
  const int64_t tasks = (N + 3) / 4;
  run(x.data(), w.data(), bias.data(), M, K, N, 0, tasks, y1.data(), false);
  run(x.data(), w.data(), bias.data(), M, K, N, 0, tasks, y2.data(), true);
  expect(same_bits(y1.data(), y2.data(), y1.size()), "bf16: vector code = portable code, bit for bit", M, K);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double want = bias[n], size = std::fabs(bias[n]);
      for (int64_t k = 0; k < K; ++k) {
        const double term = (double)x[m * K + k] * audiocpp::bf16_to_float(w[n * K + k]);
        want += term;
        size += std::fabs(term);
      }
      expect(std::fabs(y2[m * N + n] - want) <= 1e-6 * size, "bf16: portable code against double", m, n);
    }
}

// ---- Snake ------------------------------------------------------------------------------------------

void plain_sin(float* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::sin(in[i]);
}

void test_snake(std::mt19937& rng, int64_t rows, int64_t C) {
  using namespace audiocpp::snake;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(rows * C), alpha(C), inverse(C);
  for (int64_t i = 0; i < rows * C; ++i) x[i] = normal(rng) * std::pow(10.0f, (float)(i % C) / C * 6.0f - 2.0f);
  if (rows > 1) x[C + 1] = NAN;
  for (int64_t c = 0; c < C; ++c) {
    alpha[c] = std::fabs(normal(rng)) + 0.05f;
    inverse[c] = 1.0f / (alpha[c] + 1e-9f);
  }
  std::vector<float> buffer(tile_rows(C) * C), f1(rows * C), f2(rows * C);
  std::vector<uint16_t> b1(rows * C), b2(rows * C);
  run(x.data(), alpha.data(), inverse.data(), C, 0, rows, f1.data(), nullptr, plain_sin, buffer.data(), false);
  run(x.data(), alpha.data(), inverse.data(), C, 0, rows, f2.data(), nullptr, plain_sin, buffer.data(), true);
  run(x.data(), alpha.data(), inverse.data(), C, 0, rows, nullptr, b1.data(), plain_sin, buffer.data(), false);
  run(x.data(), alpha.data(), inverse.data(), C, 0, rows, nullptr, b2.data(), plain_sin, buffer.data(), true);
  expect(same_bits(f1.data(), f2.data(), f1.size()), "snake: float32, vector code = portable code", rows, C);
  expect(std::memcmp(b1.data(), b2.data(), b1.size() * 2) == 0, "snake: bfloat16, vector code = portable code",
         rows, C);
  for (int64_t i = 0; i < rows * C; ++i) {
    const int64_t c = i % C;
    const float s = std::sin(alpha[c] * x[i]);
    const float want = s * s * inverse[c] + x[i];
    expect((std::isnan(want) && std::isnan(f2[i])) || f2[i] == want, "snake: portable code against its formula", i);
    expect(b2[i] == audiocpp::float_to_bf16(f2[i]), "snake: bfloat16 = the float32 rounded", i);
  }
}

// ---- MT19937 ----------------------------------------------------------------------------------------

void test_mt(uint32_t seed, int64_t skip, int64_t total, int64_t step) {
  using namespace audiocpp::mt;
  uint32_t words[N];
  words[0] = seed;
  for (int i = 1; i < N; ++i) words[i] = 1812433253u * (words[i - 1] ^ (words[i - 1] >> 30)) + (uint32_t)i;
  std::mt19937 reference(seed);
  int32_t left = 1;
  uint64_t next = 0;
  if (skip > 0) advance(words, left, next, skip, nullptr, 0, nullptr, true);
  reference.discard(skip);
  uint32_t copy[N];
  std::memcpy(copy, words, sizeof words);
  int32_t left2 = left;
  uint64_t next2 = next;
  std::vector<int64_t> want;
  for (int64_t d = 0; d < total; d += step) want.push_back(d);
  std::vector<float> v1(want.size()), v2(want.size());
  advance(words, left, next, total, want.data(), (int64_t)want.size(), v1.data(), false);
  advance(copy, left2, next2, total, want.data(), (int64_t)want.size(), v2.data(), true);
  expect(same_bits(v1.data(), v2.data(), v1.size()), "mt19937: vector code = portable code", skip, total);
  expect(std::memcmp(words, copy, sizeof words) == 0 && left == left2 && next == next2,
         "mt19937: the same state after", skip, total);
  size_t k = 0;
  for (int64_t d = 0; d < total; ++d) {
    const uint32_t y = reference();
    if (k < want.size() && want[k] == d) {
      expect(v2[k] == (float)(y & ((1u << 24) - 1u)) / (float)(1u << 24), "mt19937: std::mt19937's draws", d);
      ++k;
    }
  }
}

}  // namespace

int main() {
  std::mt19937 rng(2026);
  for (int bits : {8, 4})
    for (int64_t M : {1, 2, 3, 4, 5, 7, 9, 70})
      for (int64_t groups : {1, 2, 3, 4, 5}) test_q8(rng, bits, M, groups, 3, (int)(M % 2));
  test_q8(rng, 8, 6, 3, 1, 1);
  test_q8(rng, 4, 4, 7, 5, 1);
  for (int64_t M : {1, 2, 3, 5})
    for (int64_t N : {1, 3, 4, 9})
      for (int64_t K : {16, 45, 96}) test_bf16(rng, M, N, K);
  for (int64_t C : {1, 19, 64, 100}) test_snake(rng, 37, C);
  test_mt(5489u, 0, 2000, 3);
  test_mt(7u, 623, 1300, 1);
  test_mt(99u, 5, 70000, 17);
  if (failures) {
    std::printf("%d of %d checks failed (%s)\n", failures, checks, audiocpp::compiled_isa());
    return 1;
  }
  std::printf("ok %s %d\n", audiocpp::compiled_isa(), checks);
  return 0;
}
