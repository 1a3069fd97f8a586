#include "moe/adapt_rule.h"

#include <fmt/format.h>

namespace moetier::moe {

AdaptDecision decide_adapt(const AdaptTierInputs& in) {
  AdaptDecision d;
  const double frac = in.total_entries > 0
                          ? static_cast<double>(in.fast_entries) / static_cast<double>(in.total_entries)
                          : 0.0;
  const int pct = static_cast<int>(frac * 100.0 + 0.5);
  const PolicyParams tuned = PolicyParams::adaptive_tuned();
  const std::string params =
      fmt::format("every {} rounds, {} swaps, x{:g}", tuned.adapt_every, tuned.adapt_swaps, tuned.adapt_decay);
  const bool in_band = frac >= kTunedMinFraction && frac <= kTunedMaxFraction;
  if (in.force_tuned) {
    d.tuned = true;
    d.reason = fmt::format("forced by --adapt-tuned (the cache holds {}% of the experts) -> {}", pct, params);
  } else if (in.slow == SlowTier::drive) {
    d.reason = "not applied, swaps would read the drive";
  } else if (!in_band) {
    d.reason = fmt::format("not applied, the cache holds {}% of the experts (tuned needs {:g}-{:g}%)", pct,
                           kTunedMinFraction * 100.0, kTunedMaxFraction * 100.0);
  } else {
    d.tuned = true;
    d.reason = fmt::format("the cache holds {}% of the experts -> {}", pct, params);
  }
  if (d.tuned) {
    d.params.adapt_every = tuned.adapt_every;
    d.params.adapt_swaps = tuned.adapt_swaps;
    d.params.adapt_decay = tuned.adapt_decay;
  }
  return d;
}

}  // namespace moetier::moe
