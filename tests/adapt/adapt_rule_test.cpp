// The rule that decides when the adaptive tier runs its tuned parameters (moe/adapt_rule.h).
#include <gtest/gtest.h>

#include "moe/adapt_rule.h"

namespace moetier::moe {
namespace {

AdaptDecision decide(int64_t fast, int64_t total, SlowTier slow, bool force = false) {
  return decide_adapt(AdaptTierInputs{fast, total, slow, force});
}

TEST(AdaptRule, TunedWhenTheFastTierHoldsTwentyToSixtyPercentOverRam) {
  for (int64_t fast : {20, 30, 60}) {
    const AdaptDecision d = decide(fast, 100, SlowTier::ram);
    EXPECT_TRUE(d.tuned) << fast;
    EXPECT_EQ(d.params.adapt_every, 2);
    EXPECT_EQ(d.params.adapt_swaps, 192);
    EXPECT_DOUBLE_EQ(d.params.adapt_decay, 0.92);
  }
  EXPECT_EQ(decide(30, 100, SlowTier::ram).reason, "the cache holds 30% of the experts -> every 2 rounds, 192 swaps, x0.92");
}

TEST(AdaptRule, DefaultOutsideTheBand) {
  for (int64_t fast : {0, 19, 61, 100}) {
    const AdaptDecision d = decide(fast, 100, SlowTier::ram);
    EXPECT_FALSE(d.tuned) << fast;
    const PolicyParams def;
    EXPECT_EQ(d.params.adapt_every, def.adapt_every);
    EXPECT_EQ(d.params.adapt_swaps, def.adapt_swaps);
    EXPECT_DOUBLE_EQ(d.params.adapt_decay, def.adapt_decay);
    EXPECT_NE(d.reason.find("not applied"), std::string::npos);
  }
  EXPECT_FALSE(decide(5, 0, SlowTier::ram).tuned);  // no experts: fraction 0
}

TEST(AdaptRule, NeverWhenSwapsReadTheDriveUnlessForced) {
  const AdaptDecision d = decide(30, 100, SlowTier::drive);
  EXPECT_FALSE(d.tuned);
  EXPECT_EQ(d.reason, "not applied, swaps would read the drive");
  const AdaptDecision forced = decide(5, 100, SlowTier::drive, true);
  EXPECT_TRUE(forced.tuned);
  EXPECT_EQ(forced.params.adapt_swaps, 192);
  EXPECT_NE(forced.reason.find("--adapt-tuned"), std::string::npos);
}

}  // namespace
}  // namespace moetier::moe
