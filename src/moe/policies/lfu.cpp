#include "moe/policies/lfu.h"

#include <utility>

namespace moetier::moe {

LfuPolicy::LfuPolicy(CacheConfig config)
    : CachePolicy(std::move(config)),
      count_(static_cast<size_t>(this->config().n_moe_layers) * static_cast<size_t>(this->config().n_expert), 0.0),
      order_(this->config().n_moe_layers * this->config().n_expert) {}

void LfuPolicy::on_hit(int32_t idx, int32_t, Phase) { order_.set(idx, ++count_[idx]); }
void LfuPolicy::on_insert(int32_t idx, int32_t, Phase) { order_.set(idx, ++count_[idx]); }

int32_t LfuPolicy::pick_victim() {
  return order_.first_where([this](int32_t i) { return evictable(i); });
}

}  // namespace moetier::moe
