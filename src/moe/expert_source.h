// How the forward pass gets routed-expert weights: an interface, so that experts can stay in the file and be
// streamed into a cache (see the streaming issue) while the resident implementation simply points into the mmap.
//
// Protocol. For one MoE layer, the MoE block asks for the set of experts its tokens were routed to, all at once,
// and receives them through ExpertConsumer::on_experts as they become available, in batches (every expert available
// at that moment, so the block can compute them in one pass of its threads), in any order, on the calling
// thread. fetch() returns after every requested expert has been delivered exactly once. A view is valid only
// during its on_experts call: a cache may recycle the slot afterwards. The resident source delivers everything
// immediately, in one batch, in request order.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "quant/matmul.h"

namespace moetier::moe {

// Shapes shared by every expert of a model (GGUF order of the stacked tensors: ffn_gate_exps/ffn_up_exps are
// [n_embd, n_ff, n_expert], ffn_down_exps is [n_ff, n_embd, n_expert]; Gemma 4 merges gate and up into one
// ffn_gate_up_exps [n_embd, 2 n_ff, n_expert] whose expert slice holds the n_ff gate rows, then the n_ff up rows). A
// source indexes its layers by MoE ordinal m in [0, n_moe_layers): the m-th block with routed experts, in ascending
// block order. The ordinal and the block index agree only when every block is a MoE layer (DeepSeek and GLM keep dense
// leading blocks).
struct ExpertShape {
  int64_t n_moe_layers = 0;  // blocks with routed experts
  int64_t n_expert = 0;      // experts per MoE layer
  int64_t n_embd = 0;        // model width
  int64_t n_ff = 0;          // expert hidden width
  bool has_bias = false;     // gpt-oss: per-expert biases on gate, up and down
  std::vector<int64_t> moe_layers;  // [n_moe_layers]: block index (blk.N) of each MoE layer, ascending
  bool merged_gate_up = false;      // Gemma 4: gate and up in one ffn_gate_up_exps tensor
};

// One expert's weights, as views.
struct ExpertWeights {
  quant::WeightView gate;  // [n_ff, n_embd] (rows, cols)
  quant::WeightView up;    // [n_ff, n_embd]; with merged_gate_up the n_ff rows right after gate's
  quant::WeightView down;  // [n_embd, n_ff]
  const float* gate_bias = nullptr;  // [n_ff] or null
  const float* up_bias = nullptr;    // [n_ff] or null
  const float* down_bias = nullptr;  // [n_embd] or null
};

class ExpertConsumer {
 public:
  virtual ~ExpertConsumer() = default;
  // experts[i]'s weights are weights[i]; the spans have the same length, at least 1.
  virtual void on_experts(std::span<const int32_t> experts, std::span<const ExpertWeights> weights) = 0;
  // A batch of one.
  void on_expert(int32_t expert, const ExpertWeights& w) { on_experts({&expert, 1}, {&w, 1}); }
};

class ExpertSource {
 public:
  virtual ~ExpertSource() = default;
  virtual const ExpertShape& shape() const = 0;
  // Deliver each expert of `experts` (distinct ids in [0, n_expert)) of MoE layer `layer` (the MoE ordinal in
  // [0, n_moe_layers), not the block index: block shape().moe_layers[layer]) to `consumer` once.
  // Must not allocate in steady state (it runs inside the forward pass).
  virtual void fetch(int64_t layer, std::span<const int32_t> experts, ExpertConsumer& consumer) = 0;
  // A hint between fetches (the next-layer prefetch, model/next_layer_guess.h): MoE layer `layer`'s next fetch will
  // probably ask for `experts` (distinct ids). A source that reads experts may start reading the ones it does not
  // hold; that fetch takes over the reads of the ones it asks for and drops the rest. Never changes what a fetch
  // delivers. Must not allocate. The default ignores it.
  virtual void prefetch(int64_t layer, std::span<const int32_t> experts) {
    (void)layer;
    (void)experts;
  }
  // Whether prefetch() can do anything, so the forward pass guesses only for a source that reads ahead.
  virtual bool reads_ahead() const { return false; }
};

}  // namespace moetier::moe
