// Gated DeltaNet linear attention (Yang, Kautz & Hatamizadeh 2024, "Gated Delta Networks: Improving Mamba2 with
// Delta Rule"), as Qwen3-Next / Qwen3.5 use it and the reference engine computes it (llama.cpp
// src/models/qwen35moe.cpp build_layer_attn_linear, src/models/delta-net-base.cpp, ggml's ssm_conv and l2_norm).
//
// For a token with normalised input x [n_embd]:
//   qkv = W_qkv x [2 * n_k_heads * d_k + n_v_heads * d_v]   (the query, key and value heads, in that order)
//   z   = W_gate x [n_v_heads * d_v];   b = W_beta x, a = W_alpha x [n_v_heads]
//   qkv <- SiLU(causal conv1d over time, kernel K per channel: c_t = sum_{j<K} w[c, j] * in_{t-K+1+j}), where the
//          K - 1 inputs before a sequence's first token are zero and the window is carried between calls
//   q, k <- q / max(||q||, eps), k / max(||k||, eps) per head (eps = layer_norm_rms_epsilon);  q <- q / sqrt(d_k)
//   beta = sigmoid(b);  g = softplus(a + dt_bias) * A   (A = ssm_a, stored as -exp(A_log): g < 0, decay e^g < 1)
//   value head h reads query/key head h mod n_k_heads (the reference tiles the key heads, ggml_repeat)
//   per value head, state S [d_v, d_k] (zero at position 0):
//     S <- e^g S;  S <- S + beta (v - S k) k^T;  o = S q
//   o <- RMSNorm(o) * ssm_norm per head (d_v), times SiLU(z);  out = W_out o [n_embd]
//
// A prompt (several tokens) computes the delta rule in chunks of kChunk tokens (the WY / chunked form of the same
// recurrence, as the reference's chunked path; delta_rule_chunked below), one token by the recurrence itself
// (delta_rule_recurrent): the two agree within float rounding (tests/model/delta_net_test.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "compute/backend.h"
#include "quant/matmul.h"

namespace moetier::model {

struct DeltaNetConfig {
  int64_t n_embd = 0;
  int64_t n_k_heads = 0;    // ssm.group_count: query/key heads
  int64_t n_v_heads = 0;    // ssm.time_step_rank: value heads (a multiple of n_k_heads)
  int64_t head_k_dim = 0;   // ssm.state_size: d_k
  int64_t head_v_dim = 0;   // ssm.inner_size / n_v_heads: d_v
  int64_t conv_kernel = 0;  // ssm.conv_kernel: K
  float norm_eps = 1e-6f;   // L2 norm floor and the gated RMSNorm's epsilon

  int64_t key_dim() const { return n_k_heads * head_k_dim; }
  int64_t value_dim() const { return n_v_heads * head_v_dim; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }  // channels of the convolution (q, k, v)
  // Floats of one sequence's state for one layer: the convolution window [K - 1, conv_dim] (oldest row first)
  // and the delta-rule state [n_v_heads, d_v, d_k].
  int64_t conv_state_elems() const { return (conv_kernel - 1) * conv_dim(); }
  int64_t ssm_state_elems() const { return n_v_heads * head_v_dim * head_k_dim; }
};

struct DeltaNetWeights {
  quant::WeightView qkv;       // [conv_dim, n_embd] (attn_qkv)
  quant::WeightView gate;      // [value_dim, n_embd] (attn_gate: z)
  quant::WeightView beta;      // [n_v_heads, n_embd] (ssm_beta)
  quant::WeightView alpha;     // [n_v_heads, n_embd] (ssm_alpha)
  std::vector<float> conv;     // [conv_dim, K] (ssm_conv1d: each channel's taps, oldest input first)
  std::vector<float> dt_bias;  // [n_v_heads] (ssm_dt.bias)
  std::vector<float> a;        // [n_v_heads] (ssm_a = -exp(A_log))
  std::vector<float> norm;     // [d_v] (ssm_norm)
  quant::WeightView out;       // [n_embd, value_dim] (ssm_out)
};

// One value head's inputs and output over n_tok tokens: token t's query at q + t * qkv_stride (d_k floats, already
// L2-normalised and scaled by 1/sqrt(d_k)), key at k + t * qkv_stride (d_k, normalised), value at
// v + t * qkv_stride (d_v); its log-decay g[t * gb_stride] (<= 0) and write strength beta[t * gb_stride]; its output
// o at out + t * out_stride (d_v floats, overwritten).
struct DeltaHead {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t qkv_stride = 0;
  const float* g = nullptr;
  const float* beta = nullptr;
  int64_t gb_stride = 0;
  float* out = nullptr;
  int64_t out_stride = 0;
};

// Working memory of delta_rule_chunked for chunks of up to `chunk` tokens (allocated once). For a chunk of c
// tokens the matrices below hold c rows (or columns) of the given width, packed.
class DeltaChunkScratch {
 public:
  DeltaChunkScratch() = default;
  DeltaChunkScratch(int64_t chunk, int64_t d_k, int64_t d_v);
  int64_t chunk() const { return chunk_; }

 private:
  friend void delta_rule_chunked(const DeltaHead& h, int64_t n_tok, int64_t d_k, int64_t d_v, float* state,
                                 DeltaChunkScratch& s);
  int64_t chunk_ = 0;
  std::vector<float> cum_;    // [chunk]: G_r, the log-decay summed over the chunk's tokens 0..r
  std::vector<float> kt_;     // [d_k, chunk]: the chunk's keys, transposed
  std::vector<float> lower_;  // [chunk, chunk]: L_rs = (beta_r k_r . k_s) e^(G_r - G_s) for s < r, else 0
  std::vector<float> qk_;     // [chunk, chunk]: (q_r . k_s) e^(G_r - G_s) for s <= r, else 0
  std::vector<float> uw_;     // [chunk, d_v + d_k]: row r = [(I + L)^-1 (beta v) | (I + L)^-1 (beta e^G k)]; the
                              // first d_v then become the new values V' = U - W S^T
  std::vector<float> st_;     // [d_k, d_v]: the state the chunk starts from, transposed
  std::vector<float> ut_;     // [d_v, chunk]: V', transposed
  std::vector<float> kd_;     // [chunk, d_k]: k_r e^(G_last - G_r), the keys as the chunk's end sees them
  std::vector<float> sum_;    // [max(chunk * d_v, d_v + d_k, d_v * d_k)]: one weighted sum of rows at a time
};

// The recurrence, token by token, on one value head's state [d_v, d_k] (row i holds S's row i: d_k floats).
void delta_rule_recurrent(const DeltaHead& h, int64_t n_tok, int64_t d_k, int64_t d_v, float* state);

// The same function computed in chunks of s.chunk() tokens: within a chunk, with G_r the cumulative log-decay,
//   L = strictly lower (beta_r k_r . k_s) e^(G_r - G_s),  U = (I + L)^-1 (beta v),  W = (I + L)^-1 (beta e^G k)
//   V' = U - W S^T,  o_r = e^(G_r) S q_r + sum_{s <= r} (q_r . k_s) e^(G_r - G_s) V'_s
//   S <- e^(G_last) S + sum_r V'_r (e^(G_last - G_r) k_r)^T
// (I + L)^-1 applied by forward substitution (L is strictly lower triangular). Every product is a weighted sum of
// rows in vector lanes (quant/kernels/vec_kernels.h attn_values_f32: attention's value sums), so the chunk's
// matrices are transposed where a sum needs its weights along a row. Decay factors below e^-64 are taken as 0
// (and W's rows they scale): below float precision against a chunk's undecayed terms, and subnormal floats cost
// microcode assists (delta_net.cpp, chunk_decay). That holds while a chunk's G never rises (every g <= 0, as in
// the models); a chunk where it does takes its decays unflushed.
void delta_rule_chunked(const DeltaHead& h, int64_t n_tok, int64_t d_k, int64_t d_v, float* state,
                        DeltaChunkScratch& s);

// Buffers for up to max_tok tokens, shared by all DeltaNet layers (one layer runs at a time).
class DeltaNet {
 public:
  static constexpr int64_t kChunk = 64;  // tokens per chunk of a prompt (the reference's chunk size)

  DeltaNet() = default;
  // threads: the threads forward() runs heads on (the model's pool, its caller included; 1 without one).
  DeltaNet(const DeltaNetConfig& cfg, int64_t max_tok, int threads);

  // out[n_tok, n_embd] = the layer on the normalised input x[n_tok, n_embd] (1 <= n_tok <= max_tok), continuing
  // the sequence whose convolution window conv_state [K - 1, conv_dim] and delta-rule state ssm_state
  // [n_v_heads, d_v, d_k] are given (both updated). One token runs the recurrence, more run it in chunks.
  void forward(const DeltaNetWeights& w, float* conv_state, float* ssm_state, const float* x, int64_t n_tok, float* out,
               compute::Backend& be);

  const DeltaNetConfig& config() const { return cfg_; }

 private:
  DeltaNetConfig cfg_;
  std::vector<float> qkv_;   // [max_tok, conv_dim]: projections before the convolution
  std::vector<float> conv_;  // [max_tok, conv_dim]: after the convolution and SiLU; q, k normalised in place
  std::vector<float> z_;     // [max_tok, value_dim]
  std::vector<float> beta_;  // [max_tok, n_v_heads]: projection, then sigmoid in place
  std::vector<float> g_;     // [max_tok, n_v_heads]: alpha projection, then the log-decay in place
  std::vector<float> o_;     // [max_tok, value_dim]: the heads' outputs, then gated and normalised
  std::vector<DeltaChunkScratch> scratch_;  // [threads]: one per thread, reused head after head (~320 KiB each)
};

}  // namespace moetier::model
