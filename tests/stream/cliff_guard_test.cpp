// The streaming store's cliff guard uses the top-k in force (StreamingOptions::n_expert_used: an --n-expert-used
// override or a route replay's), not the file's expert_used_count: one token's working set is n_moe_layers x k
// slots, and the guard engages only when the cache is smaller.
#include <string>

#include <gtest/gtest.h>

#include "moe/expert_store.h"
#include "moe/streaming_experts.h"
#include "stream_test_util.h"
#include "util/error.h"

namespace moetier::moe {
namespace {

// tiny-mixtral-Q4_0: 4 MoE layers x 8 experts, top-2 in the file.
constexpr const char* kModel = "tiny-mixtral-Q4_0";

struct Guard {
  bool engaged = false;
  uint64_t working_set = 0;  // slots
};

Guard guard_of(const gguf::GgufModel& file, int64_t cache_slots, int64_t n_expert_used) {
  StreamingOptions so;
  so.cache_bytes = ExpertStore(file).slot_bytes() * static_cast<uint64_t>(cache_slots);
  so.n_expert_used = n_expert_used;
  const StreamingExperts s(file, so);
  EXPECT_EQ(s.cache_slots(), cache_slots);
  const CachePolicy* p = s.policy();
  EXPECT_NE(p, nullptr);
  if (p == nullptr) return {};
  EXPECT_EQ(p->config().n_expert_used, n_expert_used > 0 ? n_expert_used : 2);
  return {p->cliff_guard_engaged(), p->working_set()};
}

TEST(CliffGuard, ALowerTopKOverrideKeepsASmallCacheUnguarded) {
  const auto file = gguf::GgufModel::open(test::model_path(kModel));
  ASSERT_EQ(ExpertStore(file).shape().n_moe_layers, 4);
  // 6 slots: below the file's working set (4 x 2), above the override's (4 x 1).
  const Guard file_k = guard_of(file, 6, 0);
  EXPECT_TRUE(file_k.engaged);
  EXPECT_EQ(file_k.working_set, 8u);
  const Guard override_k = guard_of(file, 6, 1);
  EXPECT_FALSE(override_k.engaged);
  EXPECT_EQ(override_k.working_set, 4u);
}

TEST(CliffGuard, AHigherTopKOverrideGuardsACacheTheFilesTopKFills) {
  const auto file = gguf::GgufModel::open(test::model_path(kModel));
  // 10 slots: above the file's working set (4 x 2), below the override's (4 x 3).
  EXPECT_FALSE(guard_of(file, 10, 0).engaged);
  const Guard override_k = guard_of(file, 10, 3);
  EXPECT_TRUE(override_k.engaged);
  EXPECT_EQ(override_k.working_set, 12u);
}

TEST(CliffGuard, AnOutOfRangeTopKIsRefusedWithTheFilesName) {
  const auto file = gguf::GgufModel::open(test::model_path(kModel));
  for (const int64_t k : {int64_t{-1}, int64_t{9}}) {
    StreamingOptions so;
    so.n_expert_used = k;
    try {
      StreamingExperts s(file, so);
      FAIL() << "no error for n_expert_used " << k;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(kModel) + ".gguf"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("n_expert_used"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace moetier::moe
