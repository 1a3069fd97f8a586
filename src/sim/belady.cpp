#include "sim/belady.h"

#include <utility>

namespace moetier::sim {

BeladyPolicy::BeladyPolicy(moe::CacheConfig config)
    : CachePolicy(std::move(config)), order_(this->config().n_moe_layers * this->config().n_expert) {}

int32_t BeladyPolicy::pick_victim() {
  return order_.first_where([this](int32_t i) { return evictable(i); });
}

}  // namespace moetier::sim
