#include "moe/policies/lfu_decay.h"

#include <utility>

#include "util/error.h"

namespace moetier::moe {

LfuDecayPolicy::LfuDecayPolicy(CacheConfig config)
    : CachePolicy(std::move(config)),
      score_(static_cast<size_t>(this->config().n_moe_layers) * static_cast<size_t>(this->config().n_expert), 0.0),
      order_(this->config().n_moe_layers * this->config().n_expert) {
  const double d = this->config().params.lfu_decay;
  if (!(d > 0.0 && d <= 1.0)) fail("lfu-decay: decay per step must be in (0, 1], got {}", d);
}

void LfuDecayPolicy::bump(int32_t idx) {
  score_[idx] += unit_;
  order_.set(idx, score_[idx]);
}

void LfuDecayPolicy::on_end_step(Phase, SwapPlan&) {
  unit_ /= config().params.lfu_decay;
  if (unit_ > 1e100) {
    const double f = 1.0 / unit_;
    for (double& s : score_) s *= f;
    order_.rescale(f);
    unit_ = 1.0;
  }
}

int32_t LfuDecayPolicy::pick_victim() {
  return order_.first_where([this](int32_t i) { return evictable(i); });
}

}  // namespace moetier::moe
