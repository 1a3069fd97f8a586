#include "moe/policies/static_hot.h"

#include <utility>

#include "util/error.h"

namespace moetier::moe {

StaticPolicy::StaticPolicy(CacheConfig config) : CachePolicy(std::move(config)) {
  const CacheConfig& c = this->config();
  for (const ExpertKey& k : c.params.static_hot) {
    if (k.layer < 0 || k.layer >= c.n_moe_layers || k.expert < 0 || k.expert >= c.n_expert) {
      fail("static: hot-list entry (layer {}, expert {}) out of range ({} MoE layers x {} experts)", k.layer, k.expert,
           c.n_moe_layers, c.n_expert);
    }
    const int32_t idx = index(k);
    if (contains(k) || weight(k.layer) > free_capacity()) continue;
    // Pinned from the start: reserve and land at once (no policy structures to update).
    reserve_pending(idx);
    swap_landed(k);
  }
}

}  // namespace moetier::moe
