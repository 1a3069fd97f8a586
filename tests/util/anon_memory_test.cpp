// util::map_anonymous: page-aligned zeroed memory, 2 MiB-aligned and advised MADV_HUGEPAGE from 2 MiB on, and a clear
// error naming the buffer when the system refuses.
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "util/anon_memory.h"
#include "util/error.h"

namespace moetier::util {
namespace {

// The VmFlags line of the mapping that contains p in /proc/self/smaps ("" if none).
std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(' ') > line.find('-')) {
      inside = lo <= at && at < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

bool all_zero(const uint8_t* p, size_t n) { return std::all_of(p, p + n, [](uint8_t b) { return b == 0; }); }

TEST(AnonMemory, SmallBuffersArePageAlignedZeroedAndWritable) {
  constexpr size_t n = 10000;
  uint8_t* p = map_anonymous(n, "test buffer");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  EXPECT_TRUE(all_zero(p, n));
  p[0] = 1, p[n - 1] = 2;  // the last byte asked for is mapped
  EXPECT_EQ(p[0] + p[n - 1], 3);
  unmap_anonymous(p, n);
  unmap_anonymous(nullptr, n);
}

TEST(AnonMemory, LargeBuffersStartOnAHugePageAndAreAdvisedHuge) {
  constexpr size_t n = 5 * kHugePageBytes + 12345;  // whole 2 MiB extents and a tail
  uint8_t* p = map_anonymous(n, "test buffer");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePageBytes, 0u);
  EXPECT_TRUE(all_zero(p, n));
  std::fill(p, p + n, uint8_t{7});
  EXPECT_EQ(p[n - 1], 7);
  // Where the kernel has transparent huge pages, the buffer carries the advice ("hg" in VmFlags, proc(5)). Whether
  // it then finds free 2 MiB pages depends on the machine's memory, so that is not asserted. MOETIER_TEST_NO_THP_ADVICE
  // is set where the advice never reaches the kernel (scripts/test-arm64.sh: qemu-user).
  if (std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled") &&
      std::getenv("MOETIER_TEST_NO_THP_ADVICE") == nullptr) {
    const std::string flags = vm_flags_of(p);
    ASSERT_FALSE(flags.empty()) << "no mapping of " << static_cast<void*>(p) << " in /proc/self/smaps";
    EXPECT_NE((flags + " ").find(" hg "), std::string::npos) << flags;
  }
  unmap_anonymous(p, n);
}

// The dense weights' copy (moe/dense_weights.cpp) is made read-only and moved whole with mremap, which before Linux
// 6.17 fails (EFAULT) for a range spanning two mappings: advising only a large buffer's whole 2 MiB extents split it
// in two where its size is not a multiple of 2 MiB.
TEST(AnonMemory, ALargeBufferIsOneMappingThatMremapMovesWhole) {
  constexpr size_t n = 3 * kHugePageBytes + 5 * 4096;
  uint8_t* p = map_anonymous(n, "test buffer");
  p[0] = 1, p[n - 1] = 2;
  ASSERT_EQ(::mprotect(p, n, PROT_READ), 0) << std::strerror(errno);
  void* moved = ::mremap(p, n, n, MREMAP_MAYMOVE);
  ASSERT_NE(moved, MAP_FAILED) << "mremap of the whole buffer: " << std::strerror(errno);
  const auto* q = static_cast<const uint8_t*>(moved);
  EXPECT_EQ(q[0] + q[n - 1], 3);
  ::munmap(moved, n);
}

TEST(AnonMemory, ARefusedMappingNamesTheBuffer) {
  try {
    map_anonymous(size_t{1} << 62, "repacked weights");
    FAIL() << "a 4 EiB mapping succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("repacked weights"), std::string::npos) << e.what();
  }
  // A size whose rounding would wrap around is refused, not rounded down.
  EXPECT_THROW(map_anonymous(SIZE_MAX - 100, "expert cache"), Error);
}

}  // namespace
}  // namespace moetier::util
