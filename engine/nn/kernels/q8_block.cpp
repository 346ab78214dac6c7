// A stack of pre-norm SwiGLU blocks, every linear a packed Q8_0 / Q4_0 matrix, in one call from Python
// (engine/nn/layers/q8_block.py): MiniCPM's block (VoxCPM's LocDiT, LocEnc, the LMs' prefill and decode steps
// over a KV cache) as its Python computes it, without Python's dispatch between the ~80 small ops of
// each block. The same bits as that Python:
//
// - the reductions, rsqrt, SiLU and attention are the same ATen calls on tensors of the same shapes;
// - the products of the Q8_0 core (q8_0_linear.cpp, included) are the kernel's own;
// - the rest is element-wise float32 arithmetic written out in the Python's order, each operation
//   rounded once (the build's -ffp-contract=off: nothing fused), which is what ATen's element-wise
//   kernels compute for each element whatever their vector width.
//
// Per block: h = x + s * o(attn(rope(q(n)), rope(k(n)), v(n))), n = rms(x); out = h + s * down(silu(gate(m)) *
// up(m)), m = rms(h); s the residual scale (1 where the model has none: o * 1 is o exactly).

#include "q8_0_linear.cpp"

#include <vector>

namespace {

using at::Tensor;

// The block's tensors, in the order engine/nn/layers/q8_block.py passes them.
constexpr int64_t PER_BLOCK = 16;
enum Slot { IN_NORM, Q, QS, K, KS, V, VS, O, OS, POST_NORM, GATE, GATES, UP, UPS, DOWN, DOWNS };

// RMSNorm of x [B, T, dim] as engine.nn.layers.norm.rms_norm computes it in float32:
// weight * (x * rsqrt(mean(x * x, -1) + eps)); mean, + eps and rsqrt are ATen's (their summation order)
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  auto squares = at::empty_like(x);
  const float* xp = x.data_ptr<float>();
  float* sp = squares.data_ptr<float>();
  const int64_t n = x.numel(), dim = x.size(-1);
  for (int64_t i = 0; i < n; ++i) sp[i] = xp[i] * xp[i];  // pow(2): x * x
  const auto inverse = at::rsqrt(squares.mean({-1}, true).add(eps)).contiguous();
  const float* rp = inverse.data_ptr<float>();
  const float* wp = weight.data_ptr<float>();
  auto out = at::empty_like(x);
  float* op = out.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    const float h = xp[i] * rp[i / dim];
    op[i] = wp[i % dim] * h;
  }
  return out;
}

// heads of rows [B * T, heads * D] -> [B, heads, T, D], rotated (NeoX halves: x * cos + rotate_half(x) * sin,
// rotate_half(x) = cat(-x2, x1)) where cos / sin [T, D] (or [B, T, D]: row_stride T * D) are given
Tensor heads_of(const Tensor& rows, int64_t B, int64_t T, int64_t heads, int64_t D, const float* cos,
                const float* sin, int64_t row_stride) {
  auto out = at::empty({B, heads, T, D}, rows.options());
  const float* src = rows.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  const int64_t half = D / 2, width = rows.size(1);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const float* x = src + (b * T + t) * width + h * D;
        float* o = dst + ((b * heads + h) * T + t) * D;
        if (cos == nullptr) {
          std::memcpy(o, x, D * sizeof(float));
          continue;
        }
        const float* c = cos + b * row_stride + t * D;
        const float* s = sin + b * row_stride + t * D;
        for (int64_t d = 0; d < D; ++d) {
          const float rotated = d < half ? -x[d + half] : x[d - half];
          const float a = x[d] * c[d], r = rotated * s[d];
          o[d] = a + r;
        }
      }
  return out;
}

// h + branch * scale, in place in h (as `residual + branch * scale`: the product rounded, then the sum)
void add_scaled(Tensor& h, const Tensor& branch, float scale) {
  float* hp = h.data_ptr<float>();
  const float* bp = branch.data_ptr<float>();
  for (int64_t i = 0, n = h.numel(); i < n; ++i) {
    const float scaled = bp[i] * scale;
    hp[i] = hp[i] + scaled;
  }
}

Tensor product(const Tensor& rows, const Tensor* w, Slot matrix) {
  return linears(rows, {w[matrix]}, {w[matrix + 1]}, false)[0];
}

}  // namespace

// x [B, T, dim] float32 contiguous; weights: PER_BLOCK tensors per block (Slot order; norms float32
// [dim], matrices packed with their scales); cos / sin float32 [T, head_dim] (or one table per row,
// [B, T, head_dim]), or None (no rope); residual_scale: s above. With caches (float32 [blocks, 2, B,
// kv_heads, S, head_dim], one for every row; or one [blocks, 2, 1, ...] per row), each block writes
// its keys (rotated) and values at positions starts (one for the cache; or one per row) .. + T: a KV
// cache's prefill or a decode step; attend_cache: the block attends over each cache's positions
// 0 .. start + T (a step; one cache per row: row by row, as the Python does) instead of this call's
// keys and values. Returns the last block's output.
Tensor block_stack(const Tensor& x, const std::vector<Tensor>& weights, int64_t heads, int64_t kv_heads,
                   int64_t head_dim, double eps, double residual_scale, bool causal, const c10::optional<Tensor>& cos,
                   const c10::optional<Tensor>& sin, const std::vector<Tensor>& caches,
                   const std::vector<int64_t>& starts, bool attend_cache) {
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == at::kFloat && x.dim() == 3 && x.is_contiguous(),
              "x: float32 [B, T, dim] on the CPU");
  TORCH_CHECK(!weights.empty() && weights.size() % PER_BLOCK == 0, "16 tensors per block");
  const int64_t B = x.size(0), T = x.size(1), dim = x.size(2), blocks = weights.size() / PER_BLOCK;
  const bool rope = cos.has_value();
  TORCH_CHECK(rope == sin.has_value(), "cos and sin, or neither");
  TORCH_CHECK(!rope || (cos->scalar_type() == at::kFloat && sin->scalar_type() == at::kFloat &&
                        cos->is_contiguous() && sin->is_contiguous() && sin->sizes() == cos->sizes() &&
                        ((cos->dim() == 2 && cos->size(0) == T) || (cos->dim() == 3 && cos->size(0) == B &&
                                                                    cos->size(1) == T)) &&
                        cos->size(-1) == head_dim),
              "cos / sin: float32 [T, head_dim] or [B, T, head_dim], contiguous");
  const int64_t rope_rows = rope && cos->dim() == 3 ? T * head_dim : 0;
  const bool per_row = caches.size() > 1 || (caches.size() == 1 && B == 1);
  TORCH_CHECK(caches.size() == starts.size() && (caches.empty() || caches.size() == 1 || (int64_t)caches.size() == B),
              "one start per cache; one cache, or one per row");
  for (size_t i = 0; i < caches.size(); ++i) {
    const auto& cache = caches[i];
    TORCH_CHECK(cache.scalar_type() == at::kFloat && cache.dim() == 6 && cache.size(0) == blocks &&
                    cache.size(1) == 2 && cache.size(2) == (per_row ? 1 : B) && cache.size(3) == kv_heads &&
                    cache.size(5) == head_dim && starts[i] >= 0 && starts[i] + T <= cache.size(4),
                "a cache: float32 [blocks, 2, rows, kv_heads, S, head_dim] with room for positions start .. start + T");
  }
  TORCH_CHECK(!caches.empty() || !attend_cache, "attending over a cache needs the cache");
  const float scale = (float)residual_scale;
  const float* c = rope ? cos->data_ptr<float>() : nullptr;
  const float* s = rope ? sin->data_ptr<float>() : nullptr;
  Tensor h = x.clone();
  for (int64_t block = 0; block < blocks; ++block) {
    const Tensor* w = weights.data() + block * PER_BLOCK;
    const auto normed = rms_norm(h, w[IN_NORM], eps).view({B * T, dim});
    const auto qkv = linears(normed, {w[Q], w[K], w[V]}, {w[QS], w[KS], w[VS]}, false);
    const auto q = heads_of(qkv[0], B, T, heads, head_dim, c, s, rope_rows);
    const auto k = heads_of(qkv[1], B, T, kv_heads, head_dim, c, s, rope_rows);
    const auto v = heads_of(qkv[2], B, T, kv_heads, head_dim, nullptr, nullptr, 0);
    std::vector<Tensor> outs;  // per cache: as StaticKVCache.write, then (a step) its layer's filled prefix
    for (size_t i = 0; i < caches.size(); ++i) {
      const int64_t start = starts[i], end = start + T;
      const auto rows_k = per_row ? k.slice(0, i, i + 1) : k, rows_v = per_row ? v.slice(0, i, i + 1) : v;
      const auto keys = caches[i].select(0, block).select(0, 0), values = caches[i].select(0, block).select(0, 1);
      keys.slice(2, start, end).copy_(rows_k);
      values.slice(2, start, end).copy_(rows_v);
      if (attend_cache)
        outs.push_back(at::scaled_dot_product_attention(per_row ? q.slice(0, i, i + 1) : q, keys.slice(2, 0, end),
                                                        values.slice(2, 0, end), {}, 0.0, causal, c10::nullopt, true));
    }
    const auto attn = !outs.empty() ? (outs.size() == 1 ? outs[0] : at::cat(outs))
                                    : at::scaled_dot_product_attention(q, k, v, {}, 0.0, causal, c10::nullopt, true);
    add_scaled(h, product(attn.transpose(1, 2).reshape({B * T, -1}), w, O), scale);
    const auto gate_up = linears(rms_norm(h, w[POST_NORM], eps).view({B * T, dim}), {w[GATE], w[UP]},
                                 {w[GATES], w[UPS]}, false);
    auto act = at::silu(gate_up[0]);
    float* ap = act.data_ptr<float>();
    const float* up = gate_up[1].data_ptr<float>();
    for (int64_t i = 0, n = act.numel(); i < n; ++i) ap[i] = ap[i] * up[i];
    add_scaled(h, product(act, w, DOWN), scale);
  }
  return h;
}
