// Grouped-query self-attention over a KV cache (Ainslie et al. 2023, "GQA"), with the optional pieces the
// supported architectures add:
//   - biases on the Q/K/V/output projections (gpt-oss);
//   - RMSNorm of each query and key head before RoPE (Qwen3 "QK-norm");
//   - attention sinks (gpt-oss model card / reference implementation): one learned logit per head that joins the
//     softmax denominator but contributes no value, so a head can attend to "nothing";
//   - a sliding window (gpt-oss even layers): a query at position p sees keys at p - window + 1 .. p.
// Query head h reads key/value head h / (n_head / n_head_kv). Scores are scaled by 1/sqrt(head_dim).
#pragma once

#include <cstdint>
#include <vector>

#include "model/kv_cache.h"
#include "model/rope.h"
#include "compute/backend.h"
#include "quant/matmul.h"

namespace moetier::model {

struct AttentionConfig {
  int64_t n_embd = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  float norm_eps = 1e-6f;  // for QK-norm
  RopeConfig rope;
};

struct AttentionWeights {
  quant::WeightView wq;  // [n_head * head_dim, n_embd]
  quant::WeightView wk;  // [n_head_kv * head_dim, n_embd]
  quant::WeightView wv;  // [n_head_kv * head_dim, n_embd]
  quant::WeightView wo;  // [n_embd, n_head * head_dim]
  std::vector<float> bq, bk, bv;  // [n_head * head_dim], [n_head_kv * head_dim] x2, or empty
  std::vector<float> bo;          // [n_embd] or empty
  std::vector<float> q_norm;      // [head_dim] or empty (QK-norm)
  std::vector<float> k_norm;      // [head_dim] or empty
  std::vector<float> sinks;       // [n_head] or empty
  int64_t sliding_window = 0;     // keys per query including itself; 0 = unlimited
};

// Buffers for up to max_tok tokens and n_ctx positions, shared by all layers (one layer runs at a time).
class Attention {
 public:
  Attention() = default;
  // n_threads: the most threads forward() may use for the heads (the model's pool size; each holds the scores
  // rows of one KV head's query heads).
  Attention(const AttentionConfig& cfg, int64_t max_tok, int64_t n_ctx, int n_threads);

  // out[n_tok, n_embd] = attention of the normalised input x[n_tok, n_embd] for tokens at pos0..pos0+n_tok-1,
  // whose keys/values are first stored into `cache` layer `layer`. Token t sees cache positions <= pos0 + t.
  void forward(const AttentionWeights& w, KvCache& cache, int64_t layer, const float* x, int64_t pos0,
               int64_t n_tok, float* out, compute::Backend& be);

  const AttentionConfig& config() const { return cfg_; }

 private:
  AttentionConfig cfg_;
  Rope rope_;
  std::vector<float> q_;       // [max_tok, n_head * head_dim]
  std::vector<float> k_;       // [max_tok, n_head_kv * head_dim]
  std::vector<float> v_;       // [max_tok, n_head_kv * head_dim]
  std::vector<float> ctx_;     // [max_tok, n_head * head_dim]: attention output before wo
  int64_t n_ctx_ = 0;
  int n_threads_ = 1;
  std::vector<float> scores_;  // [n_threads, n_head / n_head_kv, n_ctx]: a KV head's query heads' scores per thread
};

}  // namespace moetier::model
