#include "model/next_layer_guess.h"

namespace moetier::model {

NextLayerGuess::NextLayerGuess(const RouterConfig& rc)
    : rc_(rc),
      logits_(static_cast<size_t>(rc.n_expert)),
      probs_(static_cast<size_t>(rc.n_expert)),
      ids_(static_cast<size_t>(rc.n_expert_used)),
      weights_(static_cast<size_t>(rc.n_expert_used)) {}

std::span<const int32_t> NextLayerGuess::guess(const RouterWeights& rw, const float* xn, compute::Backend& be) {
  be.matmul(rw.gate_inp, xn, logits_.data(), 1);
  if (!rw.bias.empty()) {
    for (size_t e = 0; e < logits_.size(); ++e) logits_[e] += rw.bias[e];
  }
  route(rc_, logits_.data(), probs_.data(), ids_.data(), weights_.data());
  return ids_;
}

}  // namespace moetier::model
