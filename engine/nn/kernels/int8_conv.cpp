// A dynamically quantized 1-D convolution, as onnxruntime runs ConvInteger: the input quantized per
// tensor to uint8 (DynamicQuantizeLinear: scale = (max(x, 0) - min(x, 0)) / 255, zero point and values
// rounded half to even), int8 weights with a float scale per output channel, int32 products, then
// float32(acc - zero_point * sum(w)) * (x_scale * w_scale) + bias.
//
// Weights are packed once per tap in blocks of 16 output channels x 4 input channels (pack_weights); the
// input is quantized time-major with the padding holding the zero point (a real zero), so every tap's rows
// are plain row offsets. AVX2 without VNNI adds two uint8 x int8 products in 16 bits (vpmaddubsw), which
// saturates past 2 * 255 * 64: there the weights are packed as clamp(w, -64, 64) plus the (mostly zero)
// rest, two exact dot products. The sums are exact integers at every level, and the float epilogue is the
// same operations in the same order (-ffp-contract=off): every level gives the portable code's bits.
//
// One source for every ISA level (isa.h): the portable code is the reference; AVX2 (vpmaddubsw +
// vpmaddwd), AVX-VNNI and AVX-512 VNNI (vpdpbusd) accumulate the same int32 sums, and the float epilogue
// is the same operations in the same order (-ffp-contract=off), so every level gives the portable bits.

#include "isa.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace audiocpp {
namespace int8conv {

constexpr int64_t CO_BLOCK = 16;  // output channels per packed block
constexpr int64_t CI_QUAD = 4;    // input channels per dot product
constexpr int64_t TT = 4;         // output frames per tile

inline int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

struct Quantized {
  float scale;
  int32_t zero_point;
};

// DynamicQuantizeLinear's parameters for n values
inline Quantized parameters(const float* x, int64_t n) {
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  Quantized q;
  q.scale = (hi - lo) / 255.0f;
  if (q.scale == 0.0f) {  // all zeros: every value is the zero point
    q.scale = 1.0f;
    q.zero_point = 0;
    return q;
  }
  const float zp = std::nearbyint(0.0f - lo / q.scale);
  q.zero_point = (int32_t)std::min(255.0f, std::max(0.0f, zp));
  return q;
}

// x [cin, T] (channels first) -> xq [(T + 2 * pad) rows][cin4 bytes], time-major, padding = zero point
inline void quantize_rows(const float* x, int64_t cin, int64_t T, int64_t pad, int64_t cin4, Quantized q,
                          uint8_t* xq) {
  const int64_t rows = T + 2 * pad;
  std::memset(xq, q.zero_point, (size_t)(rows * cin4));
  const float zp = (float)q.zero_point;
  for (int64_t c = 0; c < cin; ++c) {
    const float* src = x + c * T;
    uint8_t* dst = xq + pad * cin4 + c;
    for (int64_t t = 0; t < T; ++t) {
      const float v = std::nearbyint(src[t] / q.scale) + zp;
      dst[t * cin4] = (uint8_t)std::min(255.0f, std::max(0.0f, v));
    }
  }
}

// the dot products of one tile: tt_count output frames (<= TT) x one block of 16 output channels
inline void tile_portable(const uint8_t* xq, int64_t cin4, const int8_t* wblock, int64_t block_stride, int64_t k,
                          int64_t dilation, int64_t stride, int64_t t0, int64_t tt_count, int32_t* acc,
                          bool clear = true) {
  if (clear)
    for (int64_t i = 0; i < TT * CO_BLOCK; ++i) acc[i] = 0;
  for (int64_t j = 0; j < k; ++j) {
    const int8_t* w = wblock + j * block_stride;
    for (int64_t q = 0; q < cin4 / CI_QUAD; ++q) {
      const int8_t* wq = w + q * CO_BLOCK * CI_QUAD;
      for (int64_t tt = 0; tt < tt_count; ++tt) {
        const uint8_t* x = xq + ((t0 + tt) * stride + j * dilation) * cin4 + q * CI_QUAD;
        for (int64_t o = 0; o < CO_BLOCK; ++o) {
          int32_t s = 0;
          for (int64_t c = 0; c < CI_QUAD; ++c) s += (int32_t)x[c] * (int32_t)wq[o * CI_QUAD + c];
          acc[tt * CO_BLOCK + o] += s;
        }
      }
    }
  }
}

#if defined(AUDIOCPP_AVX512_VNNI)
constexpr bool SPLIT_WEIGHTS = false;
inline void tile(const uint8_t* xq, int64_t cin4, const int8_t* wblock, int64_t block_stride, int64_t k,
                 int64_t dilation, int64_t stride, int64_t t0, int64_t tt_count, int32_t* acc) {
  if (tt_count != TT) return tile_portable(xq, cin4, wblock, block_stride, k, dilation, stride, t0, tt_count, acc);
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  const int64_t row = stride * cin4;
  for (int64_t j = 0; j < k; ++j) {
    const int8_t* w = wblock + j * block_stride;
    const uint8_t* x = xq + (t0 * stride + j * dilation) * cin4;
    for (int64_t q = 0; q < cin4 / CI_QUAD; ++q) {
      const __m512i wv = _mm512_loadu_si512((const void*)(w + q * CO_BLOCK * CI_QUAD));
      int32_t x0, x1, x2, x3;
      std::memcpy(&x0, x + q * CI_QUAD, 4);
      std::memcpy(&x1, x + row + q * CI_QUAD, 4);
      std::memcpy(&x2, x + 2 * row + q * CI_QUAD, 4);
      std::memcpy(&x3, x + 3 * row + q * CI_QUAD, 4);
      a0 = _mm512_dpbusd_epi32(a0, _mm512_set1_epi32(x0), wv);
      a1 = _mm512_dpbusd_epi32(a1, _mm512_set1_epi32(x1), wv);
      a2 = _mm512_dpbusd_epi32(a2, _mm512_set1_epi32(x2), wv);
      a3 = _mm512_dpbusd_epi32(a3, _mm512_set1_epi32(x3), wv);
    }
  }
  _mm512_storeu_si512((void*)acc, a0);
  _mm512_storeu_si512((void*)(acc + 16), a1);
  _mm512_storeu_si512((void*)(acc + 32), a2);
  _mm512_storeu_si512((void*)(acc + 48), a3);
}
#elif defined(AUDIOCPP_AVX2)
#if defined(AUDIOCPP_AVX_VNNI)
constexpr bool SPLIT_WEIGHTS = false;
#else
constexpr bool SPLIT_WEIGHTS = true;  // vpmaddubsw: weights in [-64, 64], the rest apart
#endif
// 8 output channels (one half of a block) of w against a broadcast quad of x
inline __m256i dot(__m256i acc, __m256i xv, __m256i wv, __m256i ones) {
#if defined(AUDIOCPP_AVX_VNNI)
  (void)ones;
  return _mm256_dpbusd_avx_epi32(acc, xv, wv);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(xv, wv), ones));
#endif
}

inline void tile(const uint8_t* xq, int64_t cin4, const int8_t* wblock, int64_t block_stride, int64_t k,
                 int64_t dilation, int64_t stride, int64_t t0, int64_t tt_count, int32_t* acc) {
  if (tt_count != TT) return tile_portable(xq, cin4, wblock, block_stride, k, dilation, stride, t0, tt_count, acc);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i a0l = _mm256_setzero_si256(), a0h = a0l, a1l = a0l, a1h = a0l, a2l = a0l, a2h = a0l, a3l = a0l, a3h = a0l;
  const int64_t row = stride * cin4;
  for (int64_t j = 0; j < k; ++j) {
    const int8_t* w = wblock + j * block_stride;
    const uint8_t* x = xq + (t0 * stride + j * dilation) * cin4;
    for (int64_t q = 0; q < cin4 / CI_QUAD; ++q) {
      const __m256i wl = _mm256_loadu_si256((const __m256i*)(w + q * CO_BLOCK * CI_QUAD));
      const __m256i wh = _mm256_loadu_si256((const __m256i*)(w + q * CO_BLOCK * CI_QUAD + 32));
      int32_t x0, x1, x2, x3;
      std::memcpy(&x0, x + q * CI_QUAD, 4);
      std::memcpy(&x1, x + row + q * CI_QUAD, 4);
      std::memcpy(&x2, x + 2 * row + q * CI_QUAD, 4);
      std::memcpy(&x3, x + 3 * row + q * CI_QUAD, 4);
      const __m256i v0 = _mm256_set1_epi32(x0), v1 = _mm256_set1_epi32(x1), v2 = _mm256_set1_epi32(x2),
                    v3 = _mm256_set1_epi32(x3);
      a0l = dot(a0l, v0, wl, ones); a0h = dot(a0h, v0, wh, ones);
      a1l = dot(a1l, v1, wl, ones); a1h = dot(a1h, v1, wh, ones);
      a2l = dot(a2l, v2, wl, ones); a2h = dot(a2h, v2, wh, ones);
      a3l = dot(a3l, v3, wl, ones); a3h = dot(a3h, v3, wh, ones);
    }
  }
  _mm256_storeu_si256((__m256i*)acc, a0l); _mm256_storeu_si256((__m256i*)(acc + 8), a0h);
  _mm256_storeu_si256((__m256i*)(acc + 16), a1l); _mm256_storeu_si256((__m256i*)(acc + 24), a1h);
  _mm256_storeu_si256((__m256i*)(acc + 32), a2l); _mm256_storeu_si256((__m256i*)(acc + 40), a2h);
  _mm256_storeu_si256((__m256i*)(acc + 48), a3l); _mm256_storeu_si256((__m256i*)(acc + 56), a3h);
}
#else
constexpr bool SPLIT_WEIGHTS = false;
inline void tile(const uint8_t* xq, int64_t cin4, const int8_t* wblock, int64_t block_stride, int64_t k,
                 int64_t dilation, int64_t stride, int64_t t0, int64_t tt_count, int32_t* acc) {
  tile_portable(xq, cin4, wblock, block_stride, k, dilation, stride, t0, tt_count, acc);
}
#endif

}  // namespace int8conv
}  // namespace audiocpp

#if defined(AUDIOCPP_TORCH)
#include <torch/extension.h>
#include <ATen/Parallel.h>

namespace ic = audiocpp::int8conv;

// weight int8 [cout, cin, k] -> packed int8 [k][cout16 / 16][cin4 / 4][16][4] (zeros where padded), and
// where this level splits the weights (AVX2 without VNNI: the packed ones are clamp(w, -64, 64)) the rest
// w - clamp(w, -64, 64): sparse where few groups have one (per block of 16 output channels, its (tap,
// input quad) groups with a nonzero rest: offsets [blocks + 1], groups [n, 2], values [n, 16, 4]), else
// packed whole like the weights (offsets and groups empty); all three empty where there is no rest
// weight int8 [cout, cin, k] -> the packed layout of f(w) for every weight (zeros where padded); one pass
// over the weights made tap-major first, so that each output channel's row is read in order
template <typename F>
torch::Tensor pack_mapped(const torch::Tensor& weight, F f) {
  const int64_t cout = weight.size(0), cin = weight.size(1), k = weight.size(2);
  const int64_t blocks = ic::round_up(cout, ic::CO_BLOCK) / ic::CO_BLOCK, quads = ic::round_up(cin, ic::CI_QUAD) / ic::CI_QUAD;
  auto taps = weight.permute({2, 0, 1}).contiguous();  // [k][cout][cin]
  auto out = torch::zeros({k * blocks * quads * ic::CO_BLOCK * ic::CI_QUAD}, torch::kInt8);
  const int8_t* src = taps.data_ptr<int8_t>();
  int8_t* dst = out.data_ptr<int8_t>();
  constexpr int64_t group = ic::CO_BLOCK * ic::CI_QUAD;
  for (int64_t j = 0; j < k; ++j)
    for (int64_t o = 0; o < cout; ++o) {
      const int8_t* row = src + (j * cout + o) * cin;
      int8_t* base = dst + (j * blocks + o / ic::CO_BLOCK) * quads * group + (o % ic::CO_BLOCK) * ic::CI_QUAD;
      for (int64_t q = 0; q < quads; ++q) {
        const int64_t c0 = q * ic::CI_QUAD, n = std::min<int64_t>(ic::CI_QUAD, cin - c0);
        for (int64_t r = 0; r < n; ++r) base[q * group + r] = f(row[c0 + r]);
      }
    }
  return out;
}

torch::Tensor pack(torch::Tensor weight) {
  return pack_mapped(weight, [](int8_t w) { return w; });
}

// weight int8 [cout, cin, k] -> packed int8 [k][cout16 / 16][cin4 / 4][16][4] (zeros where padded), and
// where this level splits the weights (AVX2 without VNNI: the packed ones are clamp(w, -64, 64)) the rest
// w - clamp(w, -64, 64): sparse where few groups have one (per block of 16 output channels, its (tap,
// input quad) groups with a nonzero rest: offsets [blocks + 1], groups [n, 2], values [n, 16, 4]), else
// packed whole like the weights (offsets and groups empty); all three empty where there is no rest
std::vector<torch::Tensor> pack_weights(torch::Tensor weight) {
  TORCH_CHECK(weight.scalar_type() == torch::kInt8 && weight.dim() == 3, "weight: int8 [cout, cin, k]");
  const int64_t cout = weight.size(0), cin = weight.size(1), k = weight.size(2);
  const int64_t blocks = ic::round_up(cout, ic::CO_BLOCK) / ic::CO_BLOCK, quads = ic::round_up(cin, ic::CI_QUAD) / ic::CI_QUAD;
  auto none = torch::empty({0}, torch::kInt32);
  if (!ic::SPLIT_WEIGHTS) return {pack(weight), none, none, torch::empty({0}, torch::kInt8)};
  auto main = pack_mapped(weight, [](int8_t w) { return (int8_t)std::min<int>(64, std::max<int>(-64, w)); });
  const auto dense_weight = weight.contiguous();  // held: its data is read below
  const int8_t* wp = dense_weight.data_ptr<int8_t>();
  bool beyond = false;  // any weight past +-64 (most layers have none: no rest at all)
  for (int64_t i = 0, n = weight.numel(); i < n && !beyond; ++i) beyond = wp[i] > 64 || wp[i] < -64;
  if (!beyond) return {main, none, none, torch::empty({0}, torch::kInt8)};
  auto rest = pack_mapped(weight, [](int8_t w) { return (int8_t)((int)w - std::min<int>(64, std::max<int>(-64, w))); });
  const int8_t* rp = rest.data_ptr<int8_t>();
  const int64_t group = ic::CO_BLOCK * ic::CI_QUAD;
  std::vector<int32_t> offsets{0}, groups;
  std::vector<int8_t> values;
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t j = 0; j < k; ++j)
      for (int64_t q = 0; q < quads; ++q) {
        const int8_t* g = rp + ((j * blocks + b) * quads + q) * group;
        bool any = false;
        for (int64_t i = 0; i < group; ++i) any = any || g[i] != 0;
        if (!any) continue;
        groups.push_back((int32_t)j);
        groups.push_back((int32_t)q);
        values.insert(values.end(), g, g + group);
      }
    offsets.push_back((int32_t)(groups.size() / 2));
  }
  if ((int64_t)(groups.size() / 2) * 10 > k * blocks * quads)  // dense: the vector code is faster
    return {main, none, none, rest};
  auto off = torch::from_blob(offsets.data(), {(int64_t)offsets.size()}, torch::kInt32).clone();
  auto grp = torch::from_blob(groups.data(), {(int64_t)groups.size()}, torch::kInt32).clone();
  auto val = torch::from_blob(values.data(), {(int64_t)values.size()}, torch::kInt8).clone();
  return {main, off, grp, val};
}

// x float32 [B, cin, T]; packed from pack_weights; wsum int32 [cout] (each channel's sum of weights);
// scale float32 [cout]; bias float32 [cout] or empty -> float32 [B, cout, T_out]
torch::Tensor conv1d(torch::Tensor x, torch::Tensor packed, torch::Tensor rest_offsets, torch::Tensor rest_groups,
                     torch::Tensor rest_values, torch::Tensor wsum, torch::Tensor scale, torch::Tensor bias,
                     int64_t cout, int64_t k, int64_t stride, int64_t pad, int64_t dilation) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.is_contiguous() && x.dim() == 3, "x: contiguous float32 [B, cin, T]");
  const int64_t B = x.size(0), cin = x.size(1), T = x.size(2);
  const int64_t cout16 = ic::round_up(cout, ic::CO_BLOCK), cin4 = ic::round_up(cin, ic::CI_QUAD);
  TORCH_CHECK(packed.numel() == k * cout16 * cin4, "packed weights do not match cin, cout and k");
  const bool split = rest_offsets.numel() > 0, dense = !split && rest_values.numel() > 0;
  TORCH_CHECK(!split || rest_offsets.numel() == cout16 / ic::CO_BLOCK + 1, "the split weights do not match");
  TORCH_CHECK(!dense || rest_values.numel() == packed.numel(), "the split weights do not match");
  const int8_t* dense_rest = dense ? rest_values.data_ptr<int8_t>() : nullptr;
  const int32_t* ro = split ? rest_offsets.data_ptr<int32_t>() : nullptr;
  const int32_t* rg = split ? rest_groups.data_ptr<int32_t>() : nullptr;
  const int8_t* rv = split ? rest_values.data_ptr<int8_t>() : nullptr;
  const int64_t span = dilation * (k - 1) + 1;
  const int64_t t_out = (T + 2 * pad - span) / stride + 1;
  TORCH_CHECK(t_out > 0, "the input is shorter than the kernel");
  auto out = torch::empty({B, cout, t_out}, x.options());
  const int8_t* wp = packed.data_ptr<int8_t>();
  const int32_t* ws = wsum.data_ptr<int32_t>();
  const float* sc = scale.data_ptr<float>();
  const float* bp = bias.numel() ? bias.data_ptr<float>() : nullptr;
  const int64_t block_stride = (cout16 / ic::CO_BLOCK) * cin4 * ic::CO_BLOCK;  // one tap
  std::vector<uint8_t> xq((size_t)((T + 2 * pad) * cin4));
  for (int64_t b = 0; b < B; ++b) {
    const float* xb = x.data_ptr<float>() + b * cin * T;
    const ic::Quantized q = ic::parameters(xb, cin * T);
    ic::quantize_rows(xb, cin, T, pad, cin4, q, xq.data());
    float* ob = out.data_ptr<float>() + b * cout * t_out;
    const int64_t tiles = (t_out + ic::TT - 1) / ic::TT;
    at::parallel_for(0, tiles, 8, [&](int64_t begin, int64_t end) {
      int32_t acc[ic::TT * ic::CO_BLOCK], extra[ic::TT * ic::CO_BLOCK];
      for (int64_t tile = begin; tile < end; ++tile) {
        const int64_t t0 = tile * ic::TT, count = std::min(ic::TT, t_out - t0);
        for (int64_t block = 0; block < cout16 / ic::CO_BLOCK; ++block) {
          ic::tile(xq.data(), cin4, wp + block * cin4 * ic::CO_BLOCK, block_stride, k, dilation, stride, t0, count,
                   acc);
          if (dense) {
            ic::tile(xq.data(), cin4, dense_rest + block * cin4 * ic::CO_BLOCK, block_stride, k, dilation, stride,
                     t0, count, extra);
            for (int64_t i = 0; i < ic::TT * ic::CO_BLOCK; ++i) acc[i] += extra[i];
          }
          if (split)  // the sparse rest of the weights past +-64: a few (tap, quad) groups per block
            for (int32_t g = ro[block]; g < ro[block + 1]; ++g) {
              const int64_t j = rg[2 * g], q = rg[2 * g + 1];
              const int8_t* wq = rv + (int64_t)g * ic::CO_BLOCK * ic::CI_QUAD;
              for (int64_t tt = 0; tt < count; ++tt) {
                const uint8_t* xr = xq.data() + ((t0 + tt) * stride + j * dilation) * cin4 + q * ic::CI_QUAD;
                for (int64_t o = 0; o < ic::CO_BLOCK; ++o) {
                  int32_t sum = 0;
                  for (int64_t c = 0; c < ic::CI_QUAD; ++c) sum += (int32_t)xr[c] * (int32_t)wq[o * ic::CI_QUAD + c];
                  acc[tt * ic::CO_BLOCK + o] += sum;
                }
              }
            }
          for (int64_t o = 0; o < ic::CO_BLOCK; ++o) {
            const int64_t co = block * ic::CO_BLOCK + o;
            if (co >= cout) break;
            const float s = q.scale * sc[co];
            const int32_t offset = q.zero_point * ws[co];
            for (int64_t tt = 0; tt < count; ++tt) {
              const float v = (float)(acc[tt * ic::CO_BLOCK + o] - offset) * s;
              ob[co * t_out + t0 + tt] = bp ? v + bp[co] : v;
            }
          }
        }
      }
    });
  }
  return out;
}

std::string variant() { return audiocpp::compiled_isa(); }
#endif
