// The policy-independent half of the expert cache: residency, capacity accounting, the batch rule, strict
// capacity and the cliff guard. Policies only order victims (pick_victim) and plan swaps.
#include "moe/cache_policy.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "util/error.h"

namespace moetier::moe {

CachePolicy::CachePolicy(CacheConfig config) : cfg_(std::move(config)) {
  if (cfg_.n_moe_layers <= 0) fail("cache config: n_moe_layers must be > 0, got {}", cfg_.n_moe_layers);
  if (cfg_.n_expert <= 0) fail("cache config: n_expert must be > 0, got {}", cfg_.n_expert);
  if (cfg_.n_expert_used < 0 || cfg_.n_expert_used > cfg_.n_expert) {
    fail("cache config: n_expert_used must be in [0, n_expert={}], got {}", cfg_.n_expert, cfg_.n_expert_used);
  }
  if (cfg_.expert_bytes.size() != static_cast<size_t>(cfg_.n_moe_layers)) {
    fail("cache config: expert_bytes has {} entries, expected one per layer ({})", cfg_.expert_bytes.size(),
         cfg_.n_moe_layers);
  }
  for (size_t l = 0; l < cfg_.expert_bytes.size(); ++l) {
    if (cfg_.expert_bytes[l] == 0) fail("cache config: expert_bytes of layer {} is 0", l);
  }
  if ((cfg_.capacity_bytes > 0) == (cfg_.capacity_entries > 0)) {
    fail("cache config: set exactly one of capacity_bytes ({}) and capacity_entries ({})", cfg_.capacity_bytes,
         cfg_.capacity_entries);
  }
  const bool by_bytes = cfg_.capacity_bytes > 0;
  capacity_ = by_bytes ? cfg_.capacity_bytes : static_cast<uint64_t>(cfg_.capacity_entries);
  weight_.resize(cfg_.n_moe_layers);
  for (int32_t l = 0; l < cfg_.n_moe_layers; ++l) {
    weight_[l] = by_bytes ? cfg_.expert_bytes[l] : 1;
    working_set_ += static_cast<uint64_t>(cfg_.n_expert_used) * weight_[l];
  }
  guard_ = cfg_.cliff_guard && cfg_.n_expert_used > 0 && capacity_ < working_set_;
  quota_.assign(cfg_.n_moe_layers, 0);
  for (int32_t l = 0; l < cfg_.n_moe_layers; ++l) {
    quota_[l] = static_cast<int32_t>(capacity_ / static_cast<uint64_t>(cfg_.n_moe_layers) / weight_[l]);
  }
  layer_count_.assign(cfg_.n_moe_layers, 0);
  const size_t n = static_cast<size_t>(cfg_.n_moe_layers) * static_cast<size_t>(cfg_.n_expert);
  state_.assign(n, kAbsent);
  batch_mark_.assign(n, 0);
}

std::vector<ExpertKey> CachePolicy::resident_keys() const {
  std::vector<ExpertKey> keys;
  for (size_t i = 0; i < state_.size(); ++i) {
    if (state_[i] == kResident) keys.push_back(key_of(static_cast<int32_t>(i)));
  }
  return keys;
}

bool CachePolicy::evictable(int32_t idx) const {
  if (state_[idx] != kResident || in_current_batch(idx)) return false;
  if (guard_) {
    const int32_t layer = idx / cfg_.n_expert;
    if (layer != batch_layer_ && layer_count_[layer] <= quota_[layer]) return false;
  }
  return true;
}

void CachePolicy::next_batch() {
  if (++batch_id_ == 0) {  // the 32-bit batch counter wrapped: forget old marks so none aliases a new batch
    std::fill(batch_mark_.begin(), batch_mark_.end(), 0u);
    batch_id_ = 1;
  }
}

void CachePolicy::make_resident(int32_t idx) {
  const int32_t layer = idx / cfg_.n_expert;
  state_[idx] = kResident;
  used_ += weight_[layer];
  resident_bytes_ += cfg_.expert_bytes[layer];
  ++resident_entries_;
  ++layer_count_[layer];
}

void CachePolicy::reserve_pending(int32_t idx) {
  assert(state_[idx] == kAbsent);
  make_resident(idx);
  state_[idx] = kPending;
}

void CachePolicy::drop(int32_t idx) {
  assert(state_[idx] != kAbsent);
  const int32_t layer = idx / cfg_.n_expert;
  if (state_[idx] == kResident) on_remove(idx);
  state_[idx] = kAbsent;
  used_ -= weight_[layer];
  resident_bytes_ -= cfg_.expert_bytes[layer];
  --resident_entries_;
  --layer_count_[layer];
}

void CachePolicy::access(int32_t layer, std::span<const int32_t> experts, Phase phase, AccessResult& out) {
  out.clear();
  if (layer < 0 || layer >= cfg_.n_moe_layers) {
    fail("expert cache: MoE layer {} out of range [0, {})", layer, cfg_.n_moe_layers);
  }
  next_batch();
  accessed_ = true;
  batch_layer_ = layer;
  batch_misses_.clear();
  for (int32_t e : experts) {
    if (e < 0 || e >= cfg_.n_expert) fail("expert cache: expert {} of layer {} out of range [0, {})", e, layer,
                                          cfg_.n_expert);
  }
  on_batch_begin(layer, experts, phase);
  out.hit.resize(experts.size());
  const int32_t base = layer * cfg_.n_expert;
  for (size_t i = 0; i < experts.size(); ++i) {
    const int32_t idx = base + experts[i];
    if (batch_mark_[idx] == batch_id_) fail("expert cache: expert {} repeated in one batch of layer {}", experts[i],
                                            layer);
    batch_mark_[idx] = batch_id_;
    const auto pos = static_cast<int32_t>(i);
    if (state_[idx] == kResident) {
      out.hit[i] = 1;
      ++out.hits;
      on_hit(idx, pos, phase);
      continue;
    }
    out.hit[i] = 0;
    ++out.misses;
    out.miss_bytes += cfg_.expert_bytes[layer];
    if (state_[idx] == kPending) {  // its background read had not landed: it is read now, in its reserved slot
      state_[idx] = kResident;
      batch_misses_.push_back(idx);
      on_insert(idx, pos, phase);
    } else {
      // A warm-held prefill, and free-only admission, take free capacity only.
      const bool free_only =
          (warm_hold_ && phase == Phase::prefill) || cfg_.admission == CacheConfig::Admission::free_only;
      if ((!free_only || free_capacity() >= weight_[layer]) && admit(idx, phase)) {
        make_resident(idx);
        batch_misses_.push_back(idx);
        on_insert(idx, pos, phase);
      } else {
        out.not_retained.push_back(experts[i]);
      }
    }
  }
  evict_until_fits(layer, out);
}

void CachePolicy::evict_until_fits(int32_t layer, AccessResult& out) {
  while (used_ > capacity_) {
    const int32_t v = pick_victim();
    if (v < 0) break;
    assert(evictable(v));
    drop(v);
    out.evicted.push_back(key_of(v));
  }
  if (!cfg_.strict || used_ <= capacity_) return;
  // Strict capacity: only this batch's entries are left to give up. Give up its newly inserted misses, last
  // first; hits stay (they were resident before: dropping one would evict an entry the batch touched).
  const int32_t base = layer * cfg_.n_expert;
  for (size_t k = batch_misses_.size(); k-- > 0 && used_ > capacity_;) {
    const int32_t idx = batch_misses_[k];
    drop(idx);
    out.not_retained.push_back(idx - base);
  }
}

void CachePolicy::end_step(Phase phase, SwapPlan& plan) {
  plan.clear();
  batch_layer_ = -1;  // between steps no batch protects anything
  next_batch();
  on_end_step(phase, plan);
  ++step_;
  warm_hold_ = false;
}

void CachePolicy::swap_landed(ExpertKey key) {
  const int32_t idx = index(key);
  if (state_[idx] != kPending) return;
  state_[idx] = kResident;
  on_landed(idx);
}

std::vector<ExpertKey> CachePolicy::warm(std::span<const ExpertKey> hottest_first) {
  if (accessed_) fail("expert cache: a warm start must come before the first lookup");
  std::vector<int32_t> chosen;
  uint64_t room = free_capacity();
  for (const ExpertKey& k : hottest_first) {
    if (k.layer < 0 || k.layer >= cfg_.n_moe_layers || k.expert < 0 || k.expert >= cfg_.n_expert) {
      fail("expert cache: warm-start entry (layer {}, expert {}) out of range [0, {}) x [0, {})", k.layer, k.expert,
           cfg_.n_moe_layers, cfg_.n_expert);
    }
    const int32_t idx = index(k);
    if (state_[idx] != kAbsent || weight_[k.layer] > room) continue;  // a repeat, or too big for what is left
    room -= weight_[k.layer];
    reserve_pending(idx);  // marks it taken, so a repeat later in the list is skipped
    chosen.push_back(idx);
  }
  for (size_t i = chosen.size(); i-- > 0;) {
    state_[chosen[i]] = kResident;
    on_landed(chosen[i]);
  }
  warm_hold_ = warm_hold_ || !chosen.empty();
  std::sort(chosen.begin(), chosen.end());
  std::vector<ExpertKey> keys;
  keys.reserve(chosen.size());
  for (int32_t idx : chosen) keys.push_back(key_of(idx));
  return keys;
}

void CachePolicy::swap_cancelled(ExpertKey key) {
  const int32_t idx = index(key);
  if (state_[idx] == kPending) drop(idx);
}

}  // namespace moetier::moe
