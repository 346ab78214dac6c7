// Snake, x + sin(alpha x)^2 / (alpha + 1e-9), over channels-last activations in one pass through
// memory, for engine/nn/dac.py. Each element goes through the operations of torch's five passes, in
// their order (mul, sin, square, mul by the reciprocal, add), and the sine is MKL's vsSin, which
// torch.sin calls on contiguous float32 tensors: the float32 result is torch's bit for bit (the
// module's check at load refuses the kernel where it is not). The bfloat16 output is rounded to
// nearest even, as torch's .to(torch.bfloat16) rounds. Compiled by engine.nn.jit with the
// instruction sets of dac.SNAKE_ISA.

#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <vector>

extern "C" void vsSin(const int n, const float* a, float* y);  // MKL, linked into libtorch_cpu

// round to nearest even, NaN to a quiet NaN (torch's float -> bfloat16); one bfloat16 in the low
// half of each 32-bit lane
static inline __m512i to_bf16(__m512 v) {
  __m512i bits = _mm512_castps_si512(v);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(bits, lsb), _mm512_set1_epi32(0x7fff)), 16);
  __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_mask_mov_epi32(rounded, nan, _mm512_set1_epi32(0x7fc0));
}

static constexpr int64_t TILE = 4096;  // elements per sine call (a buffer that stays in L1/L2)

// x [..., C] float32 contiguous; alpha, inverse [C] float32 (inverse = 1 / (alpha + 1e-9), as torch
// computes it); the output is float32, or bfloat16 when bf16_out
torch::Tensor snake_channels_last(torch::Tensor x, torch::Tensor alpha, torch::Tensor inverse, bool bf16_out) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.is_contiguous() && x.dim() >= 1, "x: contiguous float32");
  const int64_t C = x.size(-1);
  TORCH_CHECK(C > 0 && alpha.numel() == C && inverse.numel() == C, "alpha, inverse: one value per channel");
  TORCH_CHECK(alpha.scalar_type() == torch::kFloat32 && inverse.scalar_type() == torch::kFloat32, "float32 alpha");
  auto a = alpha.contiguous(), r = inverse.contiguous();
  auto out = torch::empty(x.sizes(), x.options().dtype(bf16_out ? torch::kBFloat16 : torch::kFloat32));
  const int64_t rows = x.numel() / C;
  const float* xp = x.data_ptr<float>();
  const float* ap = a.data_ptr<float>();
  const float* rp = r.data_ptr<float>();
  float* of = bf16_out ? nullptr : out.data_ptr<float>();
  uint16_t* ob = bf16_out ? reinterpret_cast<uint16_t*>(out.data_ptr<at::BFloat16>()) : nullptr;
  const int64_t tile_rows = std::max<int64_t>(1, TILE / C);
  const int64_t full = C / 16 * 16;
  const __mmask16 tail = (__mmask16)((1u << (C - full)) - 1u);
  at::parallel_for(0, rows, std::max<int64_t>(tile_rows, 32768 / C), [&](int64_t begin, int64_t end) {
    std::vector<float> buffer(tile_rows * C);
    float* s = buffer.data();
    for (int64_t row0 = begin; row0 < end; row0 += tile_rows) {
      const int64_t n = std::min(tile_rows, end - row0) * C;
      const float* xt = xp + row0 * C;
      for (int64_t i = 0; i < n; i += C) {  // alpha x
        for (int64_t c = 0; c < C; c += 16) {
          const __mmask16 m = c == full ? tail : (__mmask16)0xffff;
          _mm512_mask_storeu_ps(s + i + c, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, ap + c),
                                                            _mm512_maskz_loadu_ps(m, xt + i + c)));
        }
      }
      vsSin((int)n, s, s);
      for (int64_t i = 0; i < n; i += C) {  // sin^2 / (alpha + 1e-9) + x
        for (int64_t c = 0; c < C; c += 16) {
          const __mmask16 m = c == full ? tail : (__mmask16)0xffff;
          __m512 sv = _mm512_maskz_loadu_ps(m, s + i + c);
          __m512 y = _mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(sv, sv), _mm512_maskz_loadu_ps(m, rp + c)),
                                   _mm512_maskz_loadu_ps(m, xt + i + c));
          if (ob != nullptr) {
            _mm512_mask_cvtepi32_storeu_epi16(ob + row0 * C + i + c, m, to_bf16(y));
          } else {
            _mm512_mask_storeu_ps(of + row0 * C + i + c, m, y);
          }
        }
      }
    }
  });
  return out;
}
