// Routed mixture-of-experts feed-forward block:
//   out[t] = sum over the k experts e chosen for token t of  weight[t, e] * s_e * (down_e(glu(gate_e(x[t]) + bg_e,
//            up_e(x[t]) + bu_e)) + bd_e)
// (biases only for gpt-oss; s_e, a per-expert output scale, only for Gemma 4 (ffn_down_exps.scale), else 1). The
// router reads x, or its own input xr when the architecture gives one (Gemma 4's RMSNorm(h) * ffn_gate_inp.scale /
// sqrt(n_embd)). Routing is done for the whole batch first; then the (token, slot) pairs are grouped
// by expert so each chosen expert's weights are read once per batch, and the layer's expert set is requested from
// the ExpertSource in one call. Each batch of experts it delivers is computed in two passes of the thread pool
// (every expert's gate and up, then every expert's down: quant::matmul_groups), not two per expert. Each
// (token, slot) result is kept apart and the slots are summed in routing order at the end, so the output does
// not depend on the order or grouping in which experts arrive.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "compute/backend.h"
#include "model/glu.h"
#include "model/router.h"
#include "moe/expert_source.h"
#include "quant/matmul.h"

namespace moetier::model {

struct RouterWeights {
  quant::WeightView gate_inp;       // [n_expert, n_embd]
  std::vector<float> bias;          // [n_expert] or empty
  std::vector<float> expert_scale;  // [n_expert] or empty: s_e, multiplying expert e's output (Gemma 4)
};

class MoeFfn final : private moe::ExpertConsumer {
 public:
  MoeFfn() = default;
  MoeFfn(const RouterConfig& router, const GluConfig& glu, int64_t n_embd, int64_t n_ff, int64_t max_tok);

  // out[n_tok, n_embd] = MoE(x[n_tok, n_embd]) for MoE layer `layer` (its ordinal, model/moe_layers.h), routed by
  // xr[n_tok, n_embd] (x itself when null). If `routing` is not null it receives the chosen expert ids [n_tok,
  // n_expert_used] in descending weight order.
  void forward(int64_t layer, const RouterWeights& rw, moe::ExpertSource& experts, const float* x, const float* xr,
               int64_t n_tok, float* out, int32_t* routing, compute::Backend& be);

  const RouterConfig& router() const { return router_; }
  const GluConfig& glu_config() const { return glu_; }

  // The routing half of forward(), for a block whose products run elsewhere (model/gpu_blocks.h): from the router
  // logits lg[n_tok, n_expert] (the bias is added in place) or the routing override, the chosen experts and their
  // weights, grouped by expert as below. routing as in forward(). With a pool, a batch of at least
  // kParallelRouteTokens tokens is routed across it (each token on its own: the same choices and weights).
  void route_batch(int64_t layer, const RouterWeights& rw, float* lg, int64_t n_tok, int32_t* routing,
                   util::ThreadPool* pool = nullptr);
  // Below this many tokens the pool's wake-up costs more than routing them (~3 us a token for 128 experts).
  static constexpr int64_t kParallelRouteTokens = 32;
  // After route_batch: the distinct experts chosen, ascending; expert e's (token, slot) pairs are positions
  // start(e) .. start(e) + count(e) - 1 of the grouped order, tokens ascending; slot(p) = token * n_expert_used +
  // s of position p, position(ts) its inverse, weight(ts) the mixing weight of (token, slot) ts.
  std::span<const int32_t> chosen() const { return {chosen_.data(), static_cast<size_t>(n_chosen_)}; }
  int32_t start(int32_t e) const { return start_[static_cast<size_t>(e)]; }
  int32_t count(int32_t e) const { return count_[static_cast<size_t>(e)]; }
  int32_t slot(int64_t p) const { return slots_[static_cast<size_t>(p)]; }
  int32_t position(int64_t ts) const { return pos_[static_cast<size_t>(ts)]; }
  float weight(int64_t ts) const { return weights_[static_cast<size_t>(ts)]; }
  // After route_batch, for a block that computes only some experts here (model/gpu_blocks.h's tiered block):
  // the outputs of `experts` (some of chosen()) computed by `be` from `source`'s weights of MoE layer `layer`,
  // down(glu(gate x + bg, up x + bu)) + bd, not yet weighted, at rows start(e) .. start(e) + count(e) - 1 of
  // position_outputs() [n_tok * n_expert_used, n_embd]; x [n_tok, n_embd] as in forward().
  void compute_experts(int64_t layer, moe::ExpertSource& source, std::span<const int32_t> experts, const float* x,
                       int64_t n_tok, compute::Backend& be);
  const float* position_outputs() const { return per_slot_.data(); }
  // The router logits buffer [max_tok, n_expert], for a caller of route_batch to fill.
  float* logits() { return logits_.data(); }
  // Routes through `o` instead of the router from now on (null: the router). `o` must outlive the block.
  void set_routing_override(RoutingOverride* o) { override_ = o; }

 private:
  void on_experts(std::span<const int32_t> experts, std::span<const moe::ExpertWeights> weights) override;
  // f(i, p) for every position p of the tokens of experts[i], i < experts.size(), each `width` floats of work:
  // on the backend's pool when there are enough (over_items in moe_ffn.cpp).
  template <class F>
  void over_slots(std::span<const int32_t> experts, int64_t width, const F& f);

  RouterConfig router_;
  GluConfig glu_;
  int64_t n_embd_ = 0, n_ff_ = 0;
  std::vector<float> logits_;    // [max_tok, n_expert]: router logits
  std::vector<float> probs_;     // [max_tok, n_expert]: routing scratch, a row per token
  std::vector<int32_t> ids_;     // [max_tok, n_expert_used]: chosen experts
  std::vector<float> weights_;   // [max_tok, n_expert_used]: their mixing weights
  std::vector<int32_t> count_;   // [n_expert]: tokens routed to each expert
  std::vector<int32_t> start_;   // [n_expert]: offset of each expert's list in slots_
  // The (token, slot) pairs grouped by expert: "position" p below is an index into this order.
  std::vector<int32_t> slots_;   // [max_tok * n_expert_used]: position -> token * n_expert_used + slot
  std::vector<int32_t> pos_;     // [max_tok * n_expert_used]: token * n_expert_used + slot -> position
  std::vector<int32_t> chosen_;  // [n_expert]: distinct experts of this batch
  int32_t n_chosen_ = 0;         // of them
  // [max_tok * n_expert_used, n_embd]: input row per position (for experts that not all tokens chose)
  std::vector<float> xg_;
  std::vector<float> gate_;      // [max_tok * n_expert_used, n_ff]: gate projection per position, then the GLU output
  std::vector<float> up_;        // [max_tok * n_expert_used, n_ff]
  std::vector<float> per_slot_;  // [max_tok * n_expert_used, n_embd]: weighted expert output per position
  std::vector<quant::Product> products_;    // [2 * n_expert]: one delivery's products
  std::vector<quant::ProductGroup> groups_;  // [n_expert]: one delivery's experts
  RoutingOverride* override_ = nullptr;  // not owned; see set_routing_override
  // Per-call state read by on_experts.
  const float* x_ = nullptr;
  const RouterWeights* rw_ = nullptr;
  int64_t n_tok_ = 0;
  compute::Backend* be_ = nullptr;
  bool weigh_ = true;  // on_experts weighs each position's output (false: compute_experts)
};

}  // namespace moetier::model
