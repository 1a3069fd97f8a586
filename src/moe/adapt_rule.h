// When the adaptive tier switches to its tuned parameters (PolicyParams::adaptive_tuned(): a swap pass every 2
// rounds, up to 192 swaps, counts x0.92), as a function over tiers so that any pair of tiers (RAM cache over
// flash today, a GPU tier over RAM later) reuses it.
//
// The tuned parameters swap far more often. They pay off only when a swap is cheap and the fast tier is a real
// selection: the tier holds 20-60% of all experts (below that the hot set does not fit and swaps churn; above it
// LRU alone already keeps nearly everything hot) AND every expert outside the fast tier sits in RAM, so a swap
// is a memory copy and never a drive read that would compete with the demand misses. With the RAM cache over
// flash every swap reads the drive, so the rule keeps the default parameters unless the user forces tuned.
// Explicit --adapt-every/--adapt-swaps/--adapt-decay values override whichever set applies, field by field.
#pragma once

#include <cstdint>
#include <string>

#include "moe/cache_policy.h"

namespace moetier::moe {

enum class SlowTier : uint8_t { ram, drive };  // where the experts outside the fast tier live

struct AdaptTierInputs {
  int64_t fast_entries = 0;  // experts the fast tier (cache slots) holds
  int64_t total_entries = 0;  // all routed experts of the model (n_layer x n_expert)
  SlowTier slow = SlowTier::drive;
  bool force_tuned = false;  // --adapt-tuned
};

struct AdaptDecision {
  bool tuned = false;
  PolicyParams params;  // the adaptive fields set per the decision (other fields default)
  std::string reason;   // one line for the start log, e.g. "the cache holds 30% of the experts -> ..."
};

inline constexpr double kTunedMinFraction = 0.20;  // fast-tier share of all experts, inclusive
inline constexpr double kTunedMaxFraction = 0.60;

// Pure; never throws. A total of 0 counts as fraction 0.
AdaptDecision decide_adapt(const AdaptTierInputs& in);

}  // namespace moetier::moe
