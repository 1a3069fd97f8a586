// "lfu-decay": LFU over exponentially decayed counts. A lookup at step t adds 1 and every count fades by
// PolicyParams::lfu_decay per step (prefill pass and decode tokens alike), so the score is
// sum over past lookups of decay^(age in steps). Ties go to the least recently used.
//
// Implementation: instead of multiplying every count each step (O(n)), a lookup at step t adds decay^-t; the
// order is the same. When decay^-t grows past 1e100 all scores are rescaled (order preserved).
#pragma once

#include <vector>

#include "moe/cache_policy.h"
#include "moe/policies/scored_set.h"

namespace moetier::moe {

class LfuDecayPolicy : public CachePolicy {
 public:
  explicit LfuDecayPolicy(CacheConfig config);
  std::string_view name() const override { return "lfu-decay"; }

 protected:
  void on_hit(int32_t idx, int32_t, Phase) override { bump(idx); }
  void on_insert(int32_t idx, int32_t, Phase) override { bump(idx); }
  void on_remove(int32_t idx) override { order_.erase(idx); }
  void on_landed(int32_t idx) override { order_.set(idx, score_[idx]); }
  int32_t pick_victim() override;
  void on_end_step(Phase phase, SwapPlan& plan) override;

 private:
  void bump(int32_t idx);
  std::vector<double> score_;  // [n_moe_layers * n_expert] decayed count × unit_
  double unit_ = 1.0;          // what one lookup adds now: decay^-(steps so far), rescaled
  ScoredSet order_;
};

}  // namespace moetier::moe
