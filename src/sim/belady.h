// "belady": the offline optimum for the simulator — evict the entry whose next use is farthest in the future
// (never used again first), under the same batch rule as every policy (never an entry the current batch
// touched). With per-layer byte sizes it is the classic heuristic, not a proven optimum, but the entry sizes
// differ by at most ~15% here. It needs the future, so it exists only in the simulator.
#pragma once

#include <span>
#include <vector>

#include "moe/cache_policy.h"
#include "moe/policies/scored_set.h"

namespace moetier::sim {

class BeladyPolicy : public moe::CachePolicy {
 public:
  explicit BeladyPolicy(moe::CacheConfig config);
  std::string_view name() const override { return "belady"; }
  // Before each access(): for each expert of the batch (same order), the index of the next replayed batch that
  // uses it, or kNever.
  void set_next_uses(std::span<const int64_t> next) { next_ = next; }
  static constexpr int64_t kNever = int64_t{1} << 60;

 protected:
  void on_hit(int32_t idx, int32_t pos, moe::Phase) override { remember(idx, pos); }
  void on_insert(int32_t idx, int32_t pos, moe::Phase) override { remember(idx, pos); }
  void on_remove(int32_t idx) override { order_.erase(idx); }
  int32_t pick_victim() override;

 private:
  // Lowest score = evicted first: the negated next use.
  void remember(int32_t idx, int32_t pos) { order_.set(idx, -static_cast<double>(next_[pos])); }
  std::span<const int64_t> next_;
  moe::ScoredSet order_;
};

}  // namespace moetier::sim
