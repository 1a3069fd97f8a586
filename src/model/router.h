// Mixture-of-experts routing: from a token's router logits (ffn_gate_inp . x, plus a bias for gpt-oss) to the
// chosen experts and their mixing weights.
//   softmax_topk (Mixtral, Qwen3-MoE; Jiang et al. 2024 "Mixtral of Experts"): p = softmax(logits) over all
//     experts, choose the k largest p; with `normalize`, weights = p_chosen / sum(p_chosen) (Qwen3-MoE's
//     norm_topk_prob, always on for Mixtral and Qwen3-MoE in the reference engine).
//   topk_softmax (gpt-oss model card / reference implementation): choose the k largest logits, weights =
//     softmax over the chosen logits only.
// Ties choose the lower expert index.
#pragma once

#include <cstdint>

namespace moetier::model {

struct RouterConfig {
  enum class Gating { softmax_topk, topk_softmax } gating = Gating::softmax_topk;
  bool normalize = true;  // softmax_topk only
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;  // k (top-k)
};

// ids[k], weights[k] (in descending weight order) from logits[n_expert]. `probs` is scratch [n_expert].
void route(const RouterConfig& cfg, const float* logits, float* probs, int32_t* ids, float* weights);

// A hook that replaces the router's choice (ModelOptions::routing_override), e.g. routing replayed from a
// recorded route trace to benchmark a synthetic model under real routing (model/route_replay.h). Lossy: the
// output is no longer the model's own. The router's product is still computed, so timings stay comparable.
class RoutingOverride {
 public:
  virtual ~RoutingOverride() = default;
  // Chooses the experts of `n_tok` consecutive tokens of MoE layer `layer`: ids[n_tok, k] (distinct within a
  // token, in [0, n_expert)) and their mixing weights[n_tok, k]. Called once per layer per forward pass, on the
  // forward pass's thread; must not allocate. Throws moetier::Error when it cannot route (e.g. a trace ran out).
  virtual void route(int64_t layer, int64_t n_tok, int32_t* ids, float* weights) = 0;
};

}  // namespace moetier::model
