// Placement and cache-size decisions: pure functions of sizes, with the sentence the start log prints.
#include <gtest/gtest.h>

#include "moe/placement.h"
#include "util/error.h"

namespace moetier::moe {
namespace {

constexpr uint64_t MiB = uint64_t{1} << 20;

TEST(Placement, AutoStreamsOnlyWhenTheModelDoesNotFit) {
  const auto fits = decide_placement(Placement::automatic, 1000 * MiB, 100 * MiB, 8000 * MiB);
  EXPECT_FALSE(fits.stream);
  EXPECT_NE(fits.reason.find("experts stay mapped"), std::string::npos) << fits.reason;
  const auto big = decide_placement(Placement::automatic, 7000 * MiB, 100 * MiB, 8000 * MiB);
  EXPECT_TRUE(big.stream);
  EXPECT_NE(big.reason.find("7000 MiB"), std::string::npos) << big.reason;
  EXPECT_TRUE(decide_placement(Placement::stream, 1, 0, 8000 * MiB).stream);
  EXPECT_FALSE(decide_placement(Placement::resident, 9000 * MiB, 0, 8000 * MiB).stream);
  EXPECT_EQ(parse_placement("auto"), Placement::automatic);
  EXPECT_THROW(parse_placement("ram"), Error);
}

TEST(Placement, AutoCacheLeavesFloorDenseAndKv) {
  // 10000 available - 1536 floor - 2000 dense - 464 KV = 6000 MiB, in whole 3 MiB slots.
  const AutoCache a = auto_cache(10000 * MiB, 2000 * MiB, 464 * MiB, 3 * MiB, 10000);
  EXPECT_EQ(a.experts, 2000);
  EXPECT_EQ(a.bytes, 6000 * MiB);
  EXPECT_DOUBLE_EQ(a.percent, 20.0);
  EXPECT_EQ(a.report, "6000 MiB = 2000 experts = 20.0% of all experts");
  EXPECT_EQ(auto_cache(10000 * MiB, 2000 * MiB, 464 * MiB, 3 * MiB, 10000, kDefaultCacheFloor, 300 * MiB).experts, 100);
  EXPECT_EQ(auto_cache(10000 * MiB, 2000 * MiB, 464 * MiB, 3 * MiB, 500).experts, 500);  // all experts fit
  EXPECT_EQ(auto_cache(1000 * MiB, 2000 * MiB, 0, 3 * MiB, 500).bytes, 0u);               // nothing left
}

TEST(Placement, MemAvailableIsReadable) { EXPECT_GT(mem_available_bytes(), 0u); }

}  // namespace
}  // namespace moetier::moe
