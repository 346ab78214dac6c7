// Snake, x + sin(alpha x)^2 / (alpha + 1e-9), over channels-last activations in one pass through
// memory, for engine/nn/layers/dac.py. Each element goes through the operations of torch's five passes, in
// their order (mul, sin, square, mul by the reciprocal, add), and the sine is the one torch.sin calls
// on contiguous float32 tensors (MKL's vsSin where torch has MKL, as at::vml::vsin calls it; torch.sin
// itself elsewhere):
// the float32 result is torch's bit for bit (the module's check at load refuses the kernel where it is
// not). The bfloat16 output is rounded to nearest even, as torch's .to(torch.bfloat16) rounds.
//
// One source for every ISA level (isa.h): the arithmetic is elementwise, written once as plain loops
// that each level's compiler flags vectorize (AVX-512, AVX2, NEON), with -ffp-contract=off keeping
// every multiply and add a rounding of its own, as in torch's passes; the vector code where it is
// written out (the masked AVX-512 tails, the bfloat16 rounding) computes the same operations.

#include "isa.h"

#include <algorithm>

namespace audiocpp {
namespace snake {

// the sine torch.sin computes: out[i] = sin(in[i]) for n values (in place allowed)
using SinFn = void (*)(float* out, const float* in, int64_t n);

constexpr int64_t TILE = 4096;  // elements per sine call (a buffer that stays in L1/L2)

inline int64_t tile_rows(int64_t C) { return std::max<int64_t>(1, TILE / C); }

// the elementwise parts, portable: s = alpha x; y = s * s * inverse + x
inline void scale_portable(const float* x, const float* alpha, int64_t C, int64_t n, float* s) {
  for (int64_t i = 0; i < n; i += C)
    for (int64_t c = 0; c < C; ++c) s[i + c] = alpha[c] * x[i + c];
}

inline void finish_portable(const float* s, const float* x, const float* inverse, int64_t C, int64_t n, float* of,
                            uint16_t* ob) {
  for (int64_t i = 0; i < n; i += C)
    for (int64_t c = 0; c < C; ++c) {
      const float square = s[i + c] * s[i + c];
      const float y = square * inverse[c] + x[i + c];
      if (ob != nullptr) ob[i + c] = float_to_bf16(y);
      else of[i + c] = y;
    }
}

#if defined(AUDIOCPP_AVX512)
// round to nearest even, NaN to a quiet NaN; one bfloat16 in the low half of each 32-bit lane
inline __m512i to_bf16(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(bits, lsb), _mm512_set1_epi32(0x7fff)), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_mask_mov_epi32(rounded, nan, _mm512_set1_epi32(0x7fc0));
}

inline void finish(const float* s, const float* x, const float* inverse, int64_t C, int64_t n, float* of,
                   uint16_t* ob) {
  const int64_t full = C / 16 * 16;
  const __mmask16 tail = (__mmask16)((1u << (C - full)) - 1u);
  for (int64_t i = 0; i < n; i += C)
    for (int64_t c = 0; c < C; c += 16) {
      const __mmask16 m = c == full ? tail : (__mmask16)0xffff;
      const __m512 sv = _mm512_maskz_loadu_ps(m, s + i + c);
      const __m512 y = _mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(sv, sv), _mm512_maskz_loadu_ps(m, inverse + c)),
                                     _mm512_maskz_loadu_ps(m, x + i + c));
      if (ob != nullptr) _mm512_mask_cvtepi32_storeu_epi16(ob + i + c, m, to_bf16(y));
      else _mm512_mask_storeu_ps(of + i + c, m, y);
    }
}
#else
inline void finish(const float* s, const float* x, const float* inverse, int64_t C, int64_t n, float* of,
                   uint16_t* ob) {
  finish_portable(s, x, inverse, C, n, of, ob);
}
#endif

// rows [r0, r1) of x [rows, C] into of (float32) or ob (bfloat16), through buffer (tile_rows(C) * C)
inline void run(const float* x, const float* alpha, const float* inverse, int64_t C, int64_t r0, int64_t r1,
                float* of, uint16_t* ob, SinFn sin_fn, float* buffer, bool portable = false) {
  const int64_t rows = tile_rows(C);
  for (int64_t row0 = r0; row0 < r1; row0 += rows) {
    const int64_t n = std::min(rows, r1 - row0) * C;
    const float* xt = x + row0 * C;
    scale_portable(xt, alpha, C, n, buffer);
    sin_fn(buffer, buffer, n);
    float* o32 = of != nullptr ? of + row0 * C : nullptr;
    uint16_t* o16 = ob != nullptr ? ob + row0 * C : nullptr;
    if (portable) finish_portable(buffer, xt, inverse, C, n, o32, o16);
    else finish(buffer, xt, inverse, C, n, o32, o16);
  }
}

}  // namespace snake
}  // namespace audiocpp

#if defined(AUDIOCPP_TORCH)
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <ATen/Config.h>

#include <vector>

namespace {
#if AT_MKL_ENABLED() && !defined(__APPLE__)
extern "C" void vsSin(const int n, const float* a, float* y);  // MKL, linked into libtorch_cpu
// what at::vml::vsin (torch.sin on contiguous float32) calls where torch has MKL; n <= TILE
void torch_sin(float* out, const float* in, int64_t n) { vsSin((int)n, in, out); }
#else
// elsewhere torch.sin itself, through its dispatcher, on the tile
void torch_sin(float* out, const float* in, int64_t n) {
  auto source = at::from_blob(const_cast<float*>(in), {n}, at::kFloat);
  auto target = at::from_blob(out, {n}, at::kFloat);
  at::sin_out(target, source);
}
#endif

torch::Tensor snake(torch::Tensor x, torch::Tensor alpha, torch::Tensor inverse, bool bf16_out, bool portable) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.is_contiguous() && x.dim() >= 1, "x: contiguous float32");
  const int64_t C = x.size(-1);
  TORCH_CHECK(C > 0 && alpha.numel() == C && inverse.numel() == C, "alpha, inverse: one value per channel");
  TORCH_CHECK(alpha.scalar_type() == torch::kFloat32 && inverse.scalar_type() == torch::kFloat32, "float32 alpha");
  auto a = alpha.contiguous(), r = inverse.contiguous();
  auto out = torch::empty(x.sizes(), x.options().dtype(bf16_out ? torch::kBFloat16 : torch::kFloat32));
  const int64_t rows = x.numel() / C;
  const float* xp = x.data_ptr<float>();
  float* of = bf16_out ? nullptr : out.data_ptr<float>();
  uint16_t* ob = bf16_out ? reinterpret_cast<uint16_t*>(out.data_ptr<at::BFloat16>()) : nullptr;
  const int64_t tile = audiocpp::snake::tile_rows(C);
  at::parallel_for(0, rows, std::max<int64_t>(tile, 32768 / C), [&](int64_t begin, int64_t end) {
    std::vector<float> buffer(tile * C);
    audiocpp::snake::run(xp, a.data_ptr<float>(), r.data_ptr<float>(), C, begin, end, of, ob, torch_sin,
                         buffer.data(), portable);
  });
  return out;
}
}  // namespace

// x [..., C] float32 contiguous; alpha, inverse [C] float32 (inverse = 1 / (alpha + 1e-9), as torch
// computes it); the output is float32, or bfloat16 when bf16_out
torch::Tensor snake_channels_last(torch::Tensor x, torch::Tensor alpha, torch::Tensor inverse, bool bf16_out) {
  return snake(x, alpha, inverse, bf16_out, false);
}

// the same with the portable code (the reference every level's code must equal bit for bit)
torch::Tensor snake_channels_last_portable(torch::Tensor x, torch::Tensor alpha, torch::Tensor inverse, bool bf16_out) {
  return snake(x, alpha, inverse, bf16_out, true);
}

std::string variant() { return audiocpp::compiled_isa(); }
#endif
