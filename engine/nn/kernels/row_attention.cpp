// The decode step's attention of a continuous batch, row by row over each row's own KV cache, for
// engine/nn/kernels/row_attention.py: the same ATen calls, in the same order and with the same arguments,
// as DecoderStack._attend / _attend_grouped make from Python for each row (so the same kernels and
// the same bits), without Python's dispatch between them. Compiled by engine.nn.kernels.jit.

#include <torch/extension.h>
#include <vector>

// q [B, H, t, D], k / v [B, H_kv, t, D] (this step's, rotated); keys[r] / values[r] row r's cache
// [layers, 1, H_kv, S, D], masks[r] its additive mask [1, 1, 1, S]; row r writes slot slots[r] of
// layer `layer` and attends over its slots [0, slots[r] + t). Keys are stored scaled by `scale`.
torch::Tensor attend_rows(torch::Tensor q, torch::Tensor k, torch::Tensor v, std::vector<torch::Tensor> keys,
                          std::vector<torch::Tensor> values, std::vector<torch::Tensor> masks, int64_t layer,
                          std::vector<int64_t> slots, double scale, int64_t n_kv, int64_t n_rep) {
  const int64_t rows = (int64_t)keys.size();
  TORCH_CHECK(rows == q.size(0) && (int64_t)values.size() == rows && (int64_t)masks.size() == rows &&
              (int64_t)slots.size() == rows, "one cache, mask and slot per row");
  const int64_t heads = q.size(1), t = q.size(2), d = q.size(3);
  std::vector<torch::Tensor> outs;
  outs.reserve(rows);
  for (int64_t r = 0; r < rows; ++r) {
    auto qr = q.slice(0, r, r + 1), kr = k.slice(0, r, r + 1), vr = v.slice(0, r, r + 1);
    auto cached_keys = keys[r].select(0, layer), cached_values = values[r].select(0, layer);
    kr = kr.to(cached_keys.scalar_type());
    const int64_t slot = slots[r], end = slot + t;
    cached_keys.slice(2, slot, end).copy_(kr.mul(scale));
    cached_values.slice(2, slot, end).copy_(vr);
    auto grouped = qr.mul(scale).reshape({1, n_kv, n_rep * t, d});
    auto scores = at::matmul(grouped, cached_keys.slice(2, 0, end).transpose(-2, -1));
    scores.add_(masks[r].slice(-1, 0, end));
    auto out = at::matmul(at::softmax(scores, -1), cached_values.slice(2, 0, end));
    outs.push_back(out.view({1, heads, t, d}));
  }
  return at::cat(outs);
}
