// "adaptive": LRU plus a periodic, frequency-based background swap pass — the adaptive tier as the engine runs
// it. Exact interpretation:
//   - Counts: a decayed count per (layer, expert), +1 for each decode step whose batch for that layer routes to
//     the expert (once per step by construction: one batch per (step, layer)), whether it hits, becomes resident
//     or is used without being kept. Prefill does not count.
//   - Between passes every miss is handled exactly as by "lru" (the miss becomes resident, LRU victims).
//   - A round is one decode step; after every adapt_every-th round (end_step of a decode step) one pass runs:
//       1. candidates: per layer, the non-resident experts (not in flight either) with count >= adapt_min_count,
//          hottest first;
//       2. fills: while the cache has free capacity, the hottest candidates over all layers take it
//          (gain = their count);
//       3. replacements: per layer, the i-th remaining candidate is paired with the i-th coldest resident
//          of that layer while candidate count - resident count >= adapt_margin (gain = that difference);
//          with adapt_global, over all layers together (a resident of any layer may give way);
//       4. all moves of all layers are ranked by gain, highest first, and at most adapt_swaps are kept;
//       5. the kept moves' residents are evicted at once (SwapPlan::evict) and their candidates are loaded in
//          the background (SwapPlan::load): resident once swap_landed() is called — the simulator calls it
//          before the next step — and then the most recently used;
//       6. every count is multiplied by adapt_decay.
//   - "adaptive-tuned" is the same with PolicyParams::adaptive_tuned() (every 2 rounds, 192 swaps, decay 0.92).
#pragma once

#include <string>
#include <vector>

#include "moe/policies/lru.h"

namespace moetier::moe {

class AdaptivePolicy : public LruPolicy {
 public:
  AdaptivePolicy(CacheConfig config, std::string name);
  std::string_view name() const override { return name_; }
  bool plans_swaps() const override { return true; }

 protected:
  void on_batch_begin(int32_t layer, std::span<const int32_t> experts, Phase phase) override;
  void on_landed(int32_t idx) override { lru_.touch(idx); }
  void on_end_step(Phase phase, SwapPlan& plan) override;

 private:
  struct Move {
    double gain;
    int32_t in;   // entry to load
    int32_t out;  // entry to evict, -1 for a fill
  };
  void plan_pass(SwapPlan& plan);

  std::string name_;
  std::vector<double> count_;  // [n_moe_layers * n_expert] decayed decode-step count
  int64_t rounds_ = 0;         // decode steps ended so far
  // Scratch for the pass, kept to avoid reallocation.
  std::vector<Move> moves_;
  std::vector<int32_t> cand_, res_, fill_pool_;
};

}  // namespace moetier::moe
