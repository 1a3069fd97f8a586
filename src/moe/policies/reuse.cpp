#include "moe/policies/reuse.h"

#include <algorithm>
#include <utility>

#include "util/error.h"

namespace moetier::moe {

ReusePolicy::ReusePolicy(CacheConfig config)
    : LruPolicy(std::move(config)),
      freq_(static_cast<size_t>(this->config().n_moe_layers) * static_cast<size_t>(this->config().n_expert), 0.0) {
  const PolicyParams& p = this->config().params;
  if (!(p.reuse_decay > 0.0 && p.reuse_decay < 1.0)) fail("reuse: decay per step must be in (0, 1), got {}", p.reuse_decay);
  if (!(p.reuse_p_floor > 0.0 && p.reuse_p_floor <= 1.0)) fail("reuse: p_floor must be in (0, 1], got {}", p.reuse_p_floor);
}

void ReusePolicy::bump(int32_t idx, Phase phase) {
  freq_[idx] += unit_ * (phase == Phase::prefill ? config().params.reuse_prefill_weight : 1.0);
}

void ReusePolicy::on_hit(int32_t idx, int32_t pos, Phase phase) {
  LruPolicy::on_hit(idx, pos, phase);
  bump(idx, phase);
}

void ReusePolicy::on_insert(int32_t idx, int32_t pos, Phase phase) {
  LruPolicy::on_insert(idx, pos, phase);
  bump(idx, phase);
}

void ReusePolicy::on_end_step(Phase, SwapPlan&) {
  unit_ /= config().params.reuse_decay;
  if (unit_ > 1e100) {
    for (double& f : freq_) f /= unit_;
    unit_ = 1.0;
  }
}

int32_t ReusePolicy::pick_victim() {
  const PolicyParams& p = config().params;
  const int32_t n_moe_layers = config().n_moe_layers, n_expert = config().n_expert;
  const double rate = (1.0 - p.reuse_decay) / unit_;  // converts a stored frequency to a per-step probability
  int32_t best = -1;
  double best_t = -1.0;
  // LRU order, so that among equal expectations the least recently used wins (strict > below).
  for (int32_t i = lru_.first(); i != lru_.end(); i = lru_.after(i)) {
    if (!evictable(i)) continue;
    const int32_t l = i / n_expert;
    const double phase = static_cast<double>((l - layer_ - 1 + 2 * n_moe_layers) % n_moe_layers + 1) / n_moe_layers;
    const double prob = std::clamp(freq_[i] * rate, p.reuse_p_floor, 1.0);
    const double t = phase + (1.0 - prob) / prob;
    if (t > best_t) {
      best_t = t;
      best = i;
    }
  }
  return best;
}

}  // namespace moetier::moe
