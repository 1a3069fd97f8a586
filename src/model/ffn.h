// Dense feed-forward block: out = down(glu(gate(x), up(x))) (SwiGLU, Shazeer 2020; GEGLU for Gemma 4), for models
// whose layers have no routed experts (stories260K and other llama-architecture dense models), the leading dense
// blocks of MoE models, and Gemma 4's always-on FFN beside its routed experts.
#pragma once

#include <cstdint>
#include <vector>

#include "model/glu.h"
#include "compute/backend.h"
#include "quant/matmul.h"

namespace moetier::model {

struct FfnWeights {
  quant::WeightView gate;  // [n_ff, n_embd]
  quant::WeightView up;    // [n_ff, n_embd]
  quant::WeightView down;  // [n_embd, n_ff]
};

class DenseFfn {
 public:
  DenseFfn() = default;
  DenseFfn(int64_t n_ff, int64_t max_tok, GluConfig glu);
  // out[n_tok, n_embd] = FFN(x[n_tok, n_embd]).
  void forward(const FfnWeights& w, const float* x, int64_t n_tok, float* out, compute::Backend& be);
  const GluConfig& glu_config() const { return glu_; }

 private:
  GluConfig glu_;
  int64_t n_ff_ = 0;
  std::vector<float> gate_;  // [max_tok, n_ff]
  std::vector<float> up_;    // [max_tok, n_ff]
};

}  // namespace moetier::model
