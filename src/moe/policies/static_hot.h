// "static": a pinned hot list. PolicyParams::static_hot (hottest first; from a profile trace or the first steps
// of the run, see sim/hot_list.h) is made resident at construction, in order, while it fits the capacity; the
// engine loads resident_keys() at start. Nothing else is ever admitted: every other lookup is a miss that is
// used but not retained (AccessResult::not_retained) and nothing is ever evicted.
#pragma once

#include "moe/cache_policy.h"

namespace moetier::moe {

class StaticPolicy : public CachePolicy {
 public:
  explicit StaticPolicy(CacheConfig config);
  std::string_view name() const override { return "static"; }

 protected:
  void on_hit(int32_t, int32_t, Phase) override {}
  void on_insert(int32_t, int32_t, Phase) override {}
  void on_remove(int32_t) override {}
  bool admit(int32_t, Phase) override { return false; }
  int32_t pick_victim() override { return -1; }
};

}  // namespace moetier::moe
