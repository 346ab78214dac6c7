// AdaIN + activation in one pass through memory, for iSTFTNet-style decoders (Kokoro, StyleTTS2):
//
//   z = (1 + gamma) * instance_norm(x) * w + ... = x * A + B    per (row, channel)
//   y = z + sin(alpha z)^2 / alpha          (kind 0: Snake, as Kokoro's AdaINResBlock1 writes it)
//   y = z > 0 ? z : slope * z               (kind 1: leaky ReLU, its AdainResBlk1d)
//
// where instance_norm uses the channel's mean and biased variance over time, in double precision, and
// A = rstd * w * (1 + gamma), B = (b - mean * rstd * w) * (1 + gamma) + beta. The two passes over a
// channel's frames replace torch's nine (the norm's two, the modulation's two, Snake's five).
//
// One source for every ISA level (isa.h), written as plain loops the compiler vectorizes: the sums run in
// 16 fixed double lanes and the sine is a branch-free polynomial with explicit roundings (-ffp-contract=off),
// so every level gives the portable code's bits (the module's check at load compares them). The numbers
// differ from torch's passes by float rounding (a few ulps; docs/families/kokoro.md gives the drift).

#include "isa.h"

#include <algorithm>
#include <cmath>

namespace audiocpp {
namespace adain {

constexpr int LANES = 16;

inline uint32_t bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}

inline float from_bits(uint32_t u) {
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

// sin(x) for |x| < 8192 within 2 ulps: Cody-Waite reduction by pi/4 in three parts (cephes' split, exact
// products without fused multiply-adds), then cephes' minimax polynomials on [-pi/4, pi/4]. Branch-free
// (selections and signs as bit operations) so that it vectorizes at every level.
inline float sine(float x) {
  const uint32_t xb = bits(x);
  const float ax = from_bits(xb & 0x7fffffffu);
  int32_t j = (int32_t)(ax * 1.27323954473516f);  // 4 / pi
  j += j & 1;
  const float y = (float)j;
  const float r = ((ax - y * 0.78515625f) - y * 2.4187564849853515625e-4f) - y * 3.77489497744594108e-8f;
  const float z = r * r;
  const float s = r + r * z * (-1.6666654611e-1f + z * (8.3321608736e-3f + z * -1.9515295891e-4f));
  const float c = 1.0f - 0.5f * z + z * z * (4.166664568298827e-2f + z * (-1.388731625493765e-3f +
                                                                      z * 2.443315711809948e-5f));
  const uint32_t use_cos = 0u - (uint32_t)((j >> 1) & 1);
  const uint32_t v = (bits(c) & use_cos) | (bits(s) & ~use_cos);
  const uint32_t sign = ((uint32_t)(j & 4) << 29) ^ (xb & 0x80000000u);
  return from_bits(v ^ sign);
}

// mean and biased variance of n values, in double, over 16 fixed lanes (every level sums alike)
inline void moments(const float* x, int64_t n, double& mean, double& var) {
  double lane[LANES] = {0};
  int64_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int k = 0; k < LANES; ++k) lane[k] += (double)x[i + k];
  double sum = 0;
  for (int k = 0; k < LANES; ++k) sum += lane[k];
  for (; i < n; ++i) sum += (double)x[i];
  mean = sum / (double)n;
  double sq[LANES] = {0};
  i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int k = 0; k < LANES; ++k) {
      const double d = (double)x[i + k] - mean;
      sq[k] += d * d;
    }
  double total = 0;
  for (int k = 0; k < LANES; ++k) total += sq[k];
  for (; i < n; ++i) {
    const double d = (double)x[i] - mean;
    total += d * d;
  }
  var = total / (double)n;
}

// one channel row: n frames of x into y
inline void row(const float* x, float* y, int64_t n, float w, float b, float gamma, float beta, float alpha,
                float eps, float slope, int kind) {
  double mean, var;
  moments(x, n, mean, var);
  const double rstd = 1.0 / std::sqrt(var + (double)eps);
  const double g = 1.0 + (double)gamma;
  const float A = (float)(rstd * (double)w * g);
  const float B = (float)(((double)b - mean * rstd * (double)w) * g + (double)beta);
  if (kind == 0) {
    const float inv = 1.0f / alpha;
    for (int64_t i = 0; i < n; ++i) {
      const float z = x[i] * A + B;
      const float s = sine(alpha * z);
      y[i] = z + inv * (s * s);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float z = x[i] * A + B;
      const uint32_t positive = 0u - (uint32_t)(z > 0.0f);
      y[i] = from_bits((bits(z) & positive) | (bits(z * slope) & ~positive));
    }
  }
}

}  // namespace adain
}  // namespace audiocpp

#if defined(AUDIOCPP_TORCH)
#include <torch/extension.h>
#include <ATen/Parallel.h>

// x [B, C, T] float32 contiguous; weight, bias, alpha [C]; gamma, beta [B, C]; kind 0 (Snake with alpha)
// or 1 (leaky ReLU with slope)
torch::Tensor adain_act(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor gamma,
                        torch::Tensor beta, torch::Tensor alpha, double eps, double slope, int64_t kind) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.is_contiguous() && x.dim() == 3, "x: contiguous float32 [B, C, T]");
  const int64_t B = x.size(0), C = x.size(1), T = x.size(2);
  auto f32 = [](const torch::Tensor& t) { return t.to(torch::kFloat32).contiguous(); };
  auto w = f32(weight), b = f32(bias), g = f32(gamma), be = f32(beta), a = f32(alpha);
  TORCH_CHECK(w.numel() == C && b.numel() == C, "weight, bias: one value per channel");
  TORCH_CHECK(g.numel() == B * C && be.numel() == B * C, "gamma, beta: [B, C]");
  TORCH_CHECK(kind == 1 || a.numel() == C, "alpha: one value per channel");
  TORCH_CHECK(T > 0, "x has no frames");
  auto out = torch::empty_like(x);
  const float* xp = x.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const float *wp = w.data_ptr<float>(), *bp = b.data_ptr<float>(), *gp = g.data_ptr<float>(),
              *bep = be.data_ptr<float>(), *ap = kind == 0 ? a.data_ptr<float>() : nullptr;
  at::parallel_for(0, B * C, std::max<int64_t>(1, 16384 / T), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t c = r % C;
      audiocpp::adain::row(xp + r * T, op + r * T, T, wp[c], bp[c], gp[r], bep[r], ap ? ap[c] : 1.0f,
                           (float)eps, (float)slope, (int)kind);
    }
  });
  return out;
}

std::string variant() { return audiocpp::compiled_isa(); }
#endif
