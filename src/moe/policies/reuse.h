// "reuse" (ours): evict the resident entry expected to be needed LAST, estimated online from a decayed
// per-step routing frequency and from where the entry's layer is in the layer cycle.
//
// Model. Each decode step visits every (MoE) layer once, in order, so an expert of layer l gets its next
// chance when the forward pass next reaches l: while layer L is being served, in (l - L - 1) mod n_moe_layers + 1
// layers, i.e. a fraction  phase = ((l - L - 1) mod n_moe_layers + 1) / n_moe_layers  of a step away (layers
// after L come this step; L and the ones before it come next step). Whether it is routed at that chance is a
// Bernoulli draw with probability p, estimated as the decayed share of recent steps that routed it:
//     f = sum over past lookups of decay^(age in steps)      (+1 per batch that routes it; prefill weighs
//                                                             reuse_prefill_weight per prompt batch)
//     p = clamp(f × (1 - decay), p_floor, 1)                 (f × (1 - decay) is the decayed mean rate)
// so the expected time to the next use is  phase + (1 - p) / p  steps. The victim is the evictable entry with
// the largest expected time; ties go to the least recently used. Frequencies are kept for evicted entries too
// (the history of every (layer, expert), 8 bytes each), so a returning expert is judged on its record.
//
// Cost: a victim search scans the resident entries (O(resident) per eviction; about 1,400 entries for a
// 4 GiB Qwen3-30B-A3B cache), which is negligible next to reading one expert (~3 MiB) from flash.
#pragma once

#include <vector>

#include "moe/policies/lru.h"

namespace moetier::moe {

class ReusePolicy : public LruPolicy {
 public:
  explicit ReusePolicy(CacheConfig config);
  std::string_view name() const override { return "reuse"; }

 protected:
  void on_hit(int32_t idx, int32_t pos, Phase phase) override;
  void on_insert(int32_t idx, int32_t pos, Phase phase) override;
  void on_batch_begin(int32_t layer, std::span<const int32_t>, Phase) override { layer_ = layer; }
  int32_t pick_victim() override;
  void on_end_step(Phase phase, SwapPlan& plan) override;

 private:
  void bump(int32_t idx, Phase phase);
  std::vector<double> freq_;  // [n_moe_layers * n_expert] decayed lookup count × unit_
  double unit_ = 1.0;         // what one lookup adds now: decay^-(steps so far), rescaled
  int32_t layer_ = 0;         // layer of the batch being served
};

}  // namespace moetier::moe
