// A shared expert (Qwen2-MoE, Qwen3-Next, Qwen3.5): a dense SwiGLU FFN that every token runs beside its routed
// experts, scaled by a per-token sigmoid gate (the reference engine's build_layer_ffn in llama.cpp
// src/models/qwen35moe.cpp):
//   out = sigmoid(w_gate . x) * down(silu(gate(x)) * up(x))
// Its tensors (blk.N.ffn_{gate,up,down}_shexp, ffn_gate_inp_shexp) are dense weights: always resident, never in
// the expert cache (moe/expert_layout.h takes only *_exps tensors as routed experts).
#pragma once

#include <cstdint>
#include <vector>

#include "compute/backend.h"
#include "gguf/tensor_binder.h"
#include "model/ffn.h"
#include "quant/matmul.h"

namespace moetier::model {

struct SharedExpertWeights {
  FfnWeights ffn;              // gate / up [n_ff_shexp, n_embd], down [n_embd, n_ff_shexp]
  quant::WeightView gate_inp;  // [1, n_embd]: the sigmoid gate's weights
};

// Binds block il's ffn_{gate,up,down}_shexp and ffn_gate_inp_shexp ([n_embd], or [n_embd, 1]). Throws naming a
// missing or mis-shaped tensor.
SharedExpertWeights bind_shared_expert(const gguf::TensorBinder& bind, const gguf::GgufModel& file, int64_t il,
                                       int64_t n_embd, int64_t n_ff);

// Buffers for up to max_tok tokens, shared by all layers.
class SharedExpert {
 public:
  SharedExpert() = default;
  SharedExpert(int64_t n_ff, int64_t max_tok);
  // out[n_tok, n_embd] = the gated shared expert of x[n_tok, n_embd].
  void forward(const SharedExpertWeights& w, const float* x, int64_t n_tok, float* out, compute::Backend& be);

 private:
  DenseFfn ffn_;
  std::vector<float> gate_;  // [max_tok]: each token's gate logit
};

}  // namespace moetier::model
