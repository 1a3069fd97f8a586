// "lru": evict the least recently used evictable entry. With the batch rule of CachePolicy this is exactly the
// recording engine's byte-budgeted LRU (../shared/traces/README.md, "How the recording engine counted").
#pragma once

#include "moe/cache_policy.h"
#include "moe/policies/lru_list.h"

namespace moetier::moe {

class LruPolicy : public CachePolicy {
 public:
  explicit LruPolicy(CacheConfig config);
  std::string_view name() const override { return "lru"; }

 protected:
  void on_hit(int32_t idx, int32_t pos, Phase phase) override;
  void on_insert(int32_t idx, int32_t pos, Phase phase) override;
  void on_remove(int32_t idx) override;
  int32_t pick_victim() override;

  LruList lru_;
};

}  // namespace moetier::moe
