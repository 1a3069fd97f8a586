// "lfu": evict the evictable entry looked up least often, ties to the least recently used. Counts are kept for
// every (layer, expert), resident or not, for the whole run (one lookup per batch that routes to it, prefill
// and decode alike), so an expert that was evicted and comes back keeps its history.
#pragma once

#include <vector>

#include "moe/cache_policy.h"
#include "moe/policies/scored_set.h"

namespace moetier::moe {

class LfuPolicy : public CachePolicy {
 public:
  explicit LfuPolicy(CacheConfig config);
  std::string_view name() const override { return "lfu"; }

 protected:
  void on_hit(int32_t idx, int32_t pos, Phase phase) override;
  void on_insert(int32_t idx, int32_t pos, Phase phase) override;
  void on_remove(int32_t idx) override { order_.erase(idx); }
  void on_landed(int32_t idx) override { order_.set(idx, count_[idx]); }
  int32_t pick_victim() override;

 private:
  std::vector<double> count_;  // [n_moe_layers * n_expert] lookups so far
  ScoredSet order_;
};

}  // namespace moetier::moe
