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

TEST(Placement, MemAvailableIsReadable) {
  const MemoryReading m = read_memory();
  EXPECT_GT(m.mem_available, 0u);
  EXPECT_GT(m.available(), 0u);
  EXPECT_LE(m.available(), m.mem_available);
  EXPECT_NE(m.describe().find("MemAvailable"), std::string::npos) << m.describe();
}

// /proc/meminfo's MemAvailable line in kB, wherever it is; a missing or malformed one is an error naming the file.
TEST(Placement, MemAvailableIsParsedFromMeminfo) {
  EXPECT_EQ(parse_mem_available("MemTotal:       24000000 kB\nMemFree: 1 kB\nMemAvailable:    8388608 kB\n"),
            uint64_t{8} << 30);
  for (const char* bad : {"MemTotal: 1 kB\n", "MemAvailable: lots kB\n", "MemAvailable: 5 MB\n", ""}) {
    try {
      parse_mem_available(bad, "meminfo.txt");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("meminfo.txt"), std::string::npos) << e.what();
    }
  }
}

// A cgroup limit closer than MemAvailable decides (limit - usage + reclaimable page cache), and the start log's
// line names every figure and the limit's file; without a limit MemAvailable decides.
TEST(Placement, CgroupLimitBoundsTheAvailableMemory) {
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  MemoryReading m{21 * kGiB, std::nullopt};
  EXPECT_EQ(m.available(), 21 * kGiB);
  EXPECT_EQ(m.describe(), "MemAvailable 21.0 GiB; no cgroup memory limit: 21.0 GiB available");
  m.cgroup = CgroupMemory{"/sys/fs/cgroup/app/memory.max", 8 * kGiB, 2 * kGiB, kGiB};
  EXPECT_EQ(m.available(), 7 * kGiB);
  EXPECT_EQ(m.describe(), "MemAvailable 21.0 GiB; cgroup limit 8.0 GiB (/sys/fs/cgroup/app/memory.max), usage 2.0 GiB "
                          "of which 1.0 GiB reclaimable page cache: 7.0 GiB available");
  m.cgroup = CgroupMemory{"memory.max", 64 * kGiB, 0, 0};  // a limit beyond MemAvailable: MemAvailable decides
  EXPECT_EQ(m.available(), 21 * kGiB);
  m.cgroup = CgroupMemory{"memory.max", kGiB, 3 * kGiB, 0};  // over its limit: nothing but the reclaimable
  EXPECT_EQ(m.available(), 0u);
}

}  // namespace
}  // namespace moetier::moe
