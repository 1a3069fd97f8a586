#include "moe/policies/lru.h"

#include <utility>

namespace moetier::moe {

LruPolicy::LruPolicy(CacheConfig config)
    : CachePolicy(std::move(config)), lru_(this->config().n_moe_layers * this->config().n_expert) {}

void LruPolicy::on_hit(int32_t idx, int32_t, Phase) { lru_.touch(idx); }
void LruPolicy::on_insert(int32_t idx, int32_t, Phase) { lru_.touch(idx); }
void LruPolicy::on_remove(int32_t idx) { lru_.unlink(idx); }

int32_t LruPolicy::pick_victim() {
  // The batch's own entries sit at the MRU end and guarded ones are few (the guard engages only at small
  // capacities), so this walk is short.
  for (int32_t i = lru_.first(); i != lru_.end(); i = lru_.after(i)) {
    if (evictable(i)) return i;
  }
  return -1;
}

}  // namespace moetier::moe
