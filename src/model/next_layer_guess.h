// The next-layer expert guess behind the next-layer prefetch (moe::ExpertSource::prefetch): in a decode step, once
// MoE block m has added its output to the residual stream x, block m+1's router applied to RMSNorm(x) * norm_{m+1}
// (the input that router will read, less block m+1's attention output, which the residual stream mostly
// carries past) names the experts block m+1 will probably choose, one attention block before its router runs.
// The idea of Eliseev & Mazur 2023, "Fast Inference of Mixture-of-Experts Language Models with Offloading"
// (speculative expert loading: the next layer's gate on the current hidden state). A guess never changes the
// output: the source only reads ahead; the router of block m+1 still decides.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "compute/backend.h"
#include "model/moe_ffn.h"
#include "model/router.h"

namespace moetier::model {

class NextLayerGuess {
 public:
  NextLayerGuess() = default;
  // Buffers for one token of a router of `rc`'s shape, allocated here.
  explicit NextLayerGuess(const RouterConfig& rc);

  // The experts `rw`'s router chooses for one token's normalised input xn [n_embd] (bias added as the MoE block
  // adds it): n_expert_used distinct ids in descending weight order, valid until the next call. Allocates nothing.
  std::span<const int32_t> guess(const RouterWeights& rw, const float* xn, compute::Backend& be);

 private:
  RouterConfig rc_;
  std::vector<float> logits_;   // [n_expert]
  std::vector<float> probs_;    // [n_expert]: routing scratch
  std::vector<int32_t> ids_;    // [n_expert_used]
  std::vector<float> weights_;  // [n_expert_used]: unused mixing weights
};

}  // namespace moetier::model
