// Grouped-query self-attention over a KV cache (Ainslie et al. 2023, "GQA"), with the optional pieces the
// supported architectures add:
//   - biases on the Q/K/V/output projections (gpt-oss);
//   - RMSNorm of each query and key head before RoPE (Qwen3 "QK-norm");
//   - attention sinks (gpt-oss model card / reference implementation): one learned logit per head that joins the
//     softmax denominator but contributes no value, so a head can attend to "nothing";
//   - a sliding window (gpt-oss even layers): a query at position p sees keys at p - window + 1 .. p;
//   - Gemma 4: RMSNorm of each value head without a gain (v_norm), V = K (the key projection before its norm and
//     RoPE) on layers without attn_v, and a score scale of 1 instead of 1/sqrt(head_dim) (its Q/K norms do it).
//   - Qwen3.5 / Qwen3-Next: a per-head sigmoid output gate (output_gate): attn_q's rows hold, head after head, the
//     query's head_dim rows then the gate's (llama.cpp src/models/qwen35moe.cpp build_layer_attn); the attention
//     output is multiplied by sigmoid(gate) element by element before wo.
// Query head h reads key/value head h / (n_head / n_head_kv). Scores are scaled by `scale`, 1/sqrt(head_dim) unless
// the architecture says otherwise.
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
  float norm_eps = 1e-6f;  // for QK-norm (and the V norm)
  RopeConfig rope;
  float scale = 0.0f;      // score scale; 0 means 1/sqrt(head_dim) (Gemma 4: 1)
  bool v_norm = false;     // RMSNorm of each value head, no gain (Gemma 4)
  bool output_gate = false;  // attn_q also holds a sigmoid gate per head (Qwen3.5)
};

struct AttentionWeights {
  quant::WeightView wq;  // [n_head * head_dim, n_embd]; [2 * n_head * head_dim, n_embd] with output_gate
  quant::WeightView wk;  // [n_head_kv * head_dim, n_embd]
  quant::WeightView wv;  // [n_head_kv * head_dim, n_embd], or empty: V = K's projection (Gemma 4 global layers)
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
  const Rope& rope() const { return rope_; }

 private:
  AttentionConfig cfg_;
  Rope rope_;
  std::vector<float> q_;       // [max_tok, n_head * head_dim]
  std::vector<float> k_;       // [max_tok, n_head_kv * head_dim]
  std::vector<float> v_;       // [max_tok, n_head_kv * head_dim]
  std::vector<float> ctx_;     // [max_tok, n_head * head_dim]: attention output before wo
  std::vector<float> ones_;    // [head_dim] of 1: the V norm's gain (multiplying by 1 is exact), when v_norm
  std::vector<float> qg_;      // [max_tok, 2 * n_head * head_dim]: wq's output, when output_gate
  std::vector<float> gate_;    // [max_tok, n_head * head_dim]: the gate logits, when output_gate
  int64_t n_ctx_ = 0;
  int n_threads_ = 1;
  std::vector<float> scores_;  // [n_threads, n_head / n_head_kv, n_ctx]: a KV head's query heads' scores per thread
};

}  // namespace moetier::model
