#include "moe/slot_tier.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "util/error.h"

namespace moetier::moe {

SlotTier::SlotTier(int32_t n_moe_layers, int32_t n_expert, int32_t n_expert_used, std::vector<uint64_t> expert_bytes,
                   int64_t n_slots, const PolicyParams& params)
    : n_expert_(n_expert), n_slots_(n_slots), expert_bytes_(std::move(expert_bytes)) {
  if (n_slots <= 0) fail("expert tier: {} slots (at least 1)", n_slots);
  CacheConfig c;
  c.n_moe_layers = n_moe_layers;
  c.n_expert = n_expert;
  c.n_expert_used = n_expert_used;
  c.expert_bytes = expert_bytes_;
  c.capacity_entries = n_slots;
  c.strict = true;
  // The guard keeps LRU's evictions on a miss from starving a layer; here misses never evict.
  c.cliff_guard = false;
  c.admission = CacheConfig::Admission::free_only;
  c.params = params;
  // Any slot serves any layer, so a pass may take a cold resident of any layer. Pairing within a layer (the RAM
  // cache's rule) left the layers the first fills missed without a slot for good: on the shared Qwen3 trace at
  // 30% of the experts, 61.9% decode hit rate against 81.9% (`moetier replay --tier vram`).
  c.params.adapt_global = true;
  policy_ = make_policy("adaptive", std::move(c));
  adapt_every_ = params.adapt_every;
  const size_t n = static_cast<size_t>(n_moe_layers) * static_cast<size_t>(n_expert);
  slot_of_.assign(n, -1);
  pending_.assign(n, 0);
  const auto slots = static_cast<int32_t>(std::min<int64_t>(n_slots, static_cast<int64_t>(n)));
  for (int32_t s = slots; s-- > 0;) free_.push_back(s);  // slot 0 on top
  queue_.reserve(2 * static_cast<size_t>(std::max(params.adapt_swaps, 1)));
  landing_.reserve(queue_.capacity());
  on_slot_.resize(static_cast<size_t>(n_expert));
  fills_.reserve(static_cast<size_t>(n_expert));
}

void SlotTier::take_slot(int32_t idx) {
  assert(slot_of_[idx] < 0 && !free_.empty());
  slot_of_[idx] = free_.back();
  free_.pop_back();
}

void SlotTier::free_slot(int32_t idx) {
  assert(slot_of_[idx] >= 0);
  free_.push_back(slot_of_[idx]);
  slot_of_[idx] = -1;
}

void SlotTier::lookup(int32_t layer, std::span<const int32_t> experts) {
  policy_->access(layer, experts, phase_, access_);
  assert(access_.evicted.empty());  // free-only admission never evicts on a lookup
  fills_.clear();
  for (size_t i = 0; i < experts.size(); ++i) {
    const int32_t idx = index(layer, experts[i]);
    if (access_.hit[i] != 0) {
      on_slot_[i] = 1;
      ++counters_.hits;
    } else if (policy_->contains({layer, experts[i]})) {
      // Admitted into a free slot, or a pending load looked up before it landed (its slot is reserved): copied now.
      if (slot_of_[idx] < 0) take_slot(idx);
      pending_[idx] = 0;
      fills_.push_back(experts[i]);
      on_slot_[i] = 1;
      ++counters_.fills;
      counters_.fill_bytes += expert_bytes_[static_cast<size_t>(layer)];
    } else {
      on_slot_[i] = 0;
      ++counters_.misses_slow;
    }
  }
  counters_.lookups += experts.size();
}

std::span<const ExpertKey> SlotTier::end_step() {
  landing_.clear();
  policy_->end_step(phase_, plan_);
  if (phase_ == Phase::decode) ++counters_.rounds;
  for (const ExpertKey& k : plan_.evict) free_slot(index(k.layer, k.expert));
  if (!plan_.load.empty()) {
    queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(queue_head_));
    queue_head_ = 0;
    for (const ExpertKey& k : plan_.load) {
      const int32_t idx = index(k.layer, k.expert);
      take_slot(idx);
      pending_[idx] = 1;
      queue_.push_back(k);
    }
    counters_.swaps_planned += plan_.load.size();
    // Spread over the rounds until the next pass.
    per_round_ = (loads_queued() + static_cast<size_t>(adapt_every_) - 1) / static_cast<size_t>(adapt_every_);
  }
  while (landing_.size() < per_round_ && queue_head_ < queue_.size()) {
    const ExpertKey k = queue_[queue_head_++];
    if (pending_[index(k.layer, k.expert)] != 0) landing_.push_back(k);  // not copied by a lookup meanwhile
  }
  return landing_;
}

void SlotTier::landed(ExpertKey key) {
  const int32_t idx = index(key.layer, key.expert);
  if (pending_[idx] == 0) return;
  pending_[idx] = 0;
  policy_->swap_landed(key);
  ++counters_.swaps_landed;
  counters_.swap_bytes += expert_bytes_[static_cast<size_t>(key.layer)];
}

}  // namespace moetier::moe
