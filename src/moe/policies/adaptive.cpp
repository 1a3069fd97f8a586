#include "moe/policies/adaptive.h"

#include <algorithm>
#include <utility>

#include "util/error.h"

namespace moetier::moe {

AdaptivePolicy::AdaptivePolicy(CacheConfig config, std::string name)
    : LruPolicy(std::move(config)),
      name_(std::move(name)),
      count_(static_cast<size_t>(this->config().n_moe_layers) * static_cast<size_t>(this->config().n_expert), 0.0) {
  const PolicyParams& p = this->config().params;
  if (p.adapt_every <= 0) fail("{}: --adapt-every must be > 0 rounds, got {}", name_, p.adapt_every);
  if (p.adapt_swaps < 0) fail("{}: --adapt-swaps must be >= 0, got {}", name_, p.adapt_swaps);
  if (!(p.adapt_decay > 0.0 && p.adapt_decay <= 1.0)) {
    fail("{}: --adapt-decay must be in (0, 1], got {}", name_, p.adapt_decay);
  }
}

void AdaptivePolicy::on_batch_begin(int32_t layer, std::span<const int32_t> experts, Phase phase) {
  LruPolicy::on_batch_begin(layer, experts, phase);
  if (phase != Phase::decode) return;
  // Every routed expert counts, resident or not, and whether or not a miss is kept (a strict cache's
  // not-retained misses, the VRAM tier's misses computed where they live).
  for (const int32_t e : experts) count_[static_cast<size_t>(layer * config().n_expert + e)] += 1.0;
}

void AdaptivePolicy::on_end_step(Phase phase, SwapPlan& plan) {
  if (phase != Phase::decode) return;
  ++rounds_;
  if (rounds_ % config().params.adapt_every != 0) return;
  plan_pass(plan);
  const double f = config().params.adapt_decay;
  for (double& c : count_) c *= f;
}

void AdaptivePolicy::plan_pass(SwapPlan& plan) {
  const PolicyParams& p = config().params;
  const int32_t n_moe_layers = config().n_moe_layers, n_expert = config().n_expert;
  auto hotter = [this](int32_t a, int32_t b) { return count_[a] > count_[b] || (count_[a] == count_[b] && a < b); };
  moves_.clear();
  // 2. Fills: the hottest candidates of all layers take the free capacity.
  fill_pool_.clear();
  for (int32_t i = 0; i < n_moe_layers * n_expert; ++i) {
    if (!contains(key_of(i)) && !pending(key_of(i)) && count_[i] >= p.adapt_min_count) fill_pool_.push_back(i);
  }
  std::sort(fill_pool_.begin(), fill_pool_.end(), hotter);
  uint64_t free = free_capacity();
  for (int32_t i : fill_pool_) {
    const uint64_t w = weight(i / n_expert);
    if (w > free) continue;
    free -= w;
    moves_.push_back({count_[i], i, -1});
  }
  const size_t n_fill = moves_.size();
  auto is_filled = [&](int32_t i) {
    for (size_t k = 0; k < n_fill; ++k) {
      if (moves_[k].in == i) return true;
    }
    return false;
  };
  // 1 + 3. Per layer (or over all layers together: adapt_global): remaining candidates hottest first against
  // residents coldest first.
  const int32_t groups = p.adapt_global ? 1 : n_moe_layers;
  const int32_t per_group = p.adapt_global ? n_moe_layers * n_expert : n_expert;
  for (int32_t l = 0; l < groups; ++l) {
    cand_.clear();
    res_.clear();
    for (int32_t e = 0; e < per_group; ++e) {
      const int32_t i = l * per_group + e;
      if (contains(key_of(i))) {
        res_.push_back(i);
      } else if (!pending(key_of(i)) && count_[i] >= p.adapt_min_count && !is_filled(i)) {
        cand_.push_back(i);
      }
    }
    std::sort(cand_.begin(), cand_.end(), hotter);
    std::sort(res_.begin(), res_.end(), [&](int32_t a, int32_t b) { return hotter(b, a); });
    for (size_t k = 0; k < cand_.size() && k < res_.size(); ++k) {
      const double gain = count_[cand_[k]] - count_[res_[k]];
      if (gain < p.adapt_margin) break;
      if (!evictable(res_[k])) continue;  // a cliff-guard quota entry
      moves_.push_back({gain, cand_[k], res_[k]});
    }
  }
  // 4. Rank all moves by gain, keep at most adapt_swaps.
  std::stable_sort(moves_.begin(), moves_.end(), [](const Move& a, const Move& b) { return a.gain > b.gain; });
  if (moves_.size() > static_cast<size_t>(p.adapt_swaps)) moves_.resize(static_cast<size_t>(p.adapt_swaps));
  // 5. Evict first (frees the capacity the loads reserve), then reserve the loads.
  for (const Move& m : moves_) {
    if (m.out >= 0) {
      drop(m.out);
      plan.evict.push_back(key_of(m.out));
    }
  }
  for (const Move& m : moves_) {
    reserve_pending(m.in);
    plan.load.push_back(key_of(m.in));
  }
}

}  // namespace moetier::moe
