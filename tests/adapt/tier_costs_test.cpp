// The VRAM tier's measured costs and the split of a layer's misses between the CPU pool and PCIe
// (moe/tier_costs.h), on made-up measurements.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "moe/tier_costs.h"

namespace moetier::moe {
namespace {

TEST(TierCosts, FitsPerExpertAndPerPositionCosts) {
  TierCosts c;
  // ms = 0.2 per expert + 0.01 per position, over calls of different shapes (decodes and prefill chunks).
  for (int i = 0; i < 20; ++i) {
    for (const auto& [e, p] : {std::pair{8, 8}, std::pair{40, 600}, std::pair{6, 6}, std::pair{64, 2000}}) {
      c.observe_cpu(e, p, 0.2 * e + 0.01 * p);
    }
  }
  EXPECT_NEAR(c.cpu_ms(1), 0.21, 1e-6);
  EXPECT_NEAR(c.cpu_ms(100), 1.2, 1e-6);
}

TEST(TierCosts, DecodeCallsAloneChargeTheWholeCostToTheExpert) {
  TierCosts c;
  for (int i = 0; i < 5; ++i) c.observe_cpu(8, 8, 1.6);  // one position per expert: a + b is all that is seen
  EXPECT_NEAR(c.cpu_ms(1), 0.2, 1e-9);
}

TEST(TierCosts, CopyBandwidthIsAnAverageOfTheLandedCopies) {
  TierCosts c;
  c.observe_copy(3'000'000, 1.0);  // 3 GB/s
  EXPECT_NEAR(c.copy_gbps(), 3.0, 1e-9);
  EXPECT_NEAR(c.copy_ms(6'000'000), 2.0, 1e-9);
  c.observe_copy(0, 1.0);  // ignored
  c.observe_copy(1, 0.0);  // ignored
  EXPECT_NEAR(c.copy_gbps(), 3.0, 1e-9);
}

TEST(TierCosts, SplitBalancesTheTwoSidesAndRespectsTheStagingSlots) {
  TierCosts c;
  std::vector<uint8_t> copy;
  const std::vector<int32_t> one_each(6, 1);
  const std::vector<uint64_t> bytes(6, 1'000'000);
  c.split(one_each, bytes, 8, copy);
  EXPECT_EQ(copy, std::vector<uint8_t>(6, 0)) << "nothing is copied before both costs are measured";
  c.observe_cpu(4, 4, 4.0);          // 1 ms per expert
  c.observe_copy(1'000'000, 1.0);    // 1 ms per expert's bytes
  c.split(one_each, bytes, 8, copy);
  int copied = 0;
  for (const uint8_t v : copy) copied += v;
  EXPECT_EQ(copied, 3) << "equal costs: half each way";
  c.split(one_each, bytes, 1, copy);
  copied = 0;
  for (const uint8_t v : copy) copied += v;
  EXPECT_EQ(copied, 1) << "one staging slot";
  // An expert with many tokens costs the CPU far more than its copy: it crosses, the small ones stay.
  TierCosts p;
  for (int i = 0; i < 10; ++i) {
    p.observe_cpu(10, 10, 1.0);
    p.observe_cpu(10, 1000, 10.9);  // 0.09 per expert + 0.01 per position
  }
  p.observe_copy(1'000'000, 0.5);
  const std::vector<int32_t> tokens = {500, 1, 1};
  p.split(tokens, std::vector<uint64_t>(3, 1'000'000), 4, copy);
  EXPECT_EQ(copy, (std::vector<uint8_t>{1, 0, 0}));
}

}  // namespace
}  // namespace moetier::moe
