// The bookkeeping of a fast expert tier of fixed slots over experts that stay where they live (the VRAM tier over
// RAM, moe/vram_tier.h): which (MoE layer, expert) entries hold a slot, which slot, what a lookup computes where,
// and when the adaptive swap pass's loads land. It owns no weight memory and copies nothing; the engine copies
// what it is told to, and `moetier replay --tier vram` (src/sim) drives the very same object over a route trace,
// so their hit and miss counts agree.
//
// The rule (Strata's, the issue's):
//   - A lookup's experts that hold a slot are hits, computed from the fast tier.
//   - A miss that finds a free slot takes it and is copied in now ("fill": the tier fills itself on first use);
//     so is a miss whose swap-in is still pending (its slot is reserved: it is copied now, not later).
//   - Every other miss is computed where it lives (the CPU pool, from RAM) and does not enter the tier: a miss never
//     evicts. Only the adaptive pass replaces residents (moe/policies/adaptive.h: decayed counts, a pass every
//     adapt_every decode steps of at most adapt_swaps swaps): the same policy object as the RAM cache's, with
//     strict slot capacity, admission into free slots only (CacheConfig::Admission::free_only) and candidates
//     paired with the coldest residents of every layer (PolicyParams::adapt_global: a slot serves any layer).
//   - Spread swaps: a pass's loads are not copied in one burst. Each round (decode step) lands at most
//     ceil(loads / adapt_every) of them, so a pass's loads are spread over the rounds until the next pass; an
//     expert whose load has not landed is a miss (computed where it lives) unless a lookup finds it pending, which
//     copies it at once (above).
//
// Protocol: set_phase(); per MoE layer lookup() (the engine then copies fills() into their slots); end_step() at
// the end of each step returns the loads to copy now, each then confirmed with landed(). Allocates at
// construction only. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "moe/cache_policy.h"

namespace moetier::moe {

struct SlotTierCounters {
  uint64_t rounds = 0;        // decode steps ended
  uint64_t lookups = 0;       // (layer, expert) lookups: a layer's distinct experts per step
  uint64_t hits = 0;          // held a slot
  uint64_t fills = 0;         // misses copied into a free or reserved slot and computed from it
  uint64_t misses_slow = 0;   // misses computed where they live
  uint64_t swaps_planned = 0;  // loads the adaptive passes decided
  uint64_t swaps_landed = 0;  // of them, copied in
  uint64_t swap_bytes = 0;    // bytes the landed swaps copied
  uint64_t fill_bytes = 0;    // bytes the fills copied
  double hit_rate() const { return lookups > 0 ? static_cast<double>(hits) / static_cast<double>(lookups) : 0.0; }
  // Field by field: what a step or a phase added to the running counters.
  SlotTierCounters& operator+=(const SlotTierCounters& d) {
    rounds += d.rounds;
    lookups += d.lookups;
    hits += d.hits;
    fills += d.fills;
    misses_slow += d.misses_slow;
    swaps_planned += d.swaps_planned;
    swaps_landed += d.swaps_landed;
    swap_bytes += d.swap_bytes;
    fill_bytes += d.fill_bytes;
    return *this;
  }
  friend SlotTierCounters operator-(SlotTierCounters a, const SlotTierCounters& b) {
    a.rounds -= b.rounds;
    a.lookups -= b.lookups;
    a.hits -= b.hits;
    a.fills -= b.fills;
    a.misses_slow -= b.misses_slow;
    a.swaps_planned -= b.swaps_planned;
    a.swaps_landed -= b.swaps_landed;
    a.swap_bytes -= b.swap_bytes;
    a.fill_bytes -= b.fill_bytes;
    return a;
  }
};

class SlotTier {
 public:
  // n_slots > 0 slots shared by every MoE layer; expert_bytes[layer] are one expert's bytes (counted in the
  // copies' bytes). params: the adaptive pass's (adapt_every, adapt_swaps, adapt_decay, ...).
  // Throws moetier::Error for an inconsistent config (names the field).
  SlotTier(int32_t n_moe_layers, int32_t n_expert, int32_t n_expert_used, std::vector<uint64_t> expert_bytes,
           int64_t n_slots, const PolicyParams& params);

  int64_t n_slots() const { return n_slots_; }
  void set_phase(Phase p) { phase_ = p; }
  Phase phase() const { return phase_; }

  // One MoE layer's distinct experts (ids in [0, n_expert)). After it: on_slot(i) whether experts[i] is computed
  // from its slot (slot(layer, experts[i])), fills() the experts whose bytes must be copied into their slots first.
  void lookup(int32_t layer, std::span<const int32_t> experts);
  bool on_slot(size_t i) const { return on_slot_[i] != 0; }
  std::span<const int32_t> fills() const { return fills_; }
  // The slot of (layer, expert), -1 when it holds none (a pending load's slot counts: it is reserved).
  int32_t slot(int32_t layer, int32_t expert) const { return slot_of_[index(layer, expert)]; }

  // Ends a step: a decode step may run the adaptive pass; returns the loads that land this round (keys, each with
  // its slot: slot(key)). The caller copies each and calls landed(key).
  std::span<const ExpertKey> end_step();
  void landed(ExpertKey key);

  const SlotTierCounters& counters() const { return counters_; }
  const CachePolicy& policy() const { return *policy_; }
  // Loads planned and not yet landed.
  size_t loads_queued() const { return queue_.size() - queue_head_; }

 private:
  int32_t index(int32_t layer, int32_t expert) const { return layer * n_expert_ + expert; }
  void take_slot(int32_t idx);
  void free_slot(int32_t idx);

  int32_t n_expert_ = 0;
  int64_t n_slots_ = 0;
  std::vector<uint64_t> expert_bytes_;  // [n_moe_layers]
  int32_t adapt_every_ = 1;
  std::unique_ptr<CachePolicy> policy_;
  Phase phase_ = Phase::prefill;
  std::vector<int32_t> slot_of_;    // [n_moe_layers * n_expert]: slot, or -1
  std::vector<uint8_t> pending_;    // [n_moe_layers * n_expert]: 1 while its load is queued and not copied
  std::vector<int32_t> free_;       // free slots (a stack)
  std::vector<ExpertKey> queue_;    // the pending loads of the passes, oldest first
  size_t queue_head_ = 0;           // loads before it are landed or dropped
  size_t per_round_ = 0;            // loads landed per round since the last pass
  std::vector<ExpertKey> landing_;  // this round's loads (end_step's result)
  AccessResult access_;
  SwapPlan plan_;
  std::vector<uint8_t> on_slot_;    // [n_expert]
  std::vector<int32_t> fills_;      // [n_expert]
  SlotTierCounters counters_;
};

}  // namespace moetier::moe
