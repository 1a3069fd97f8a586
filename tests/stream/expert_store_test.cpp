// The expert store's read layout: every expert of every oracle MoE model, read into a slot through the aligned
// windows, views exactly the bytes the resident source maps (weights and biases), for single-file and split
// models; and the slot arena is sized for the largest layer.
#include <cstring>

#include <gtest/gtest.h>

#include "gguf/writer.h"
#include "moe/expert_store.h"
#include "moe/io/model_files.h"
#include "moe/resident_experts.h"
#include "moe/slot_arena.h"
#include "stream_test_util.h"
#include "util/error.h"

namespace moetier::moe {
namespace {

bool same_view(const quant::WeightView& a, const quant::WeightView& b) {
  return a.type == b.type && a.rows == b.rows && a.cols == b.cols && a.row_bytes == b.row_bytes &&
         std::memcmp(a.data, b.data, static_cast<size_t>(a.rows) * a.row_bytes) == 0;
}

void check_all_experts(const gguf::GgufModel& model, bool direct) {
  const ExpertStore store(model);
  const ExpertShape& sh = store.shape();
  const ResidentExperts resident(model, sh);
  std::vector<std::filesystem::path> paths;
  for (const auto& s : model.shards()) paths.push_back(s.path);
  const io::ModelFiles files(paths, io::FileOptions{direct, {}});
  ASSERT_EQ(files.direct(), direct) << files.direct_note();
  const SlotArena arena(store.slot_bytes(), 1, 0);
  EXPECT_GE(store.slot_bytes(), store.max_expert_bytes());
  for (int64_t l = 0; l < sh.n_moe_layers; ++l) {
    for (int32_t e = 0; e < sh.n_expert; ++e) {
      std::memset(arena.slot(0), 0xAB, arena.slot_bytes());
      for (int s = 0; s < store.n_slices(l); ++s) {
        const SliceRead r = store.slice_read(l, e, s);
        ASSERT_EQ(r.file_offset % io::kPage, 0u);
        // Whole pages, or clipped at the end of its shard (never past it: direct_tail_test.cpp).
        ASSERT_TRUE(r.length % io::kPage == 0 || r.file_offset + r.length == model.shards()[r.shard].file_size);
        ASSERT_LE(r.file_offset + r.length, model.shards()[r.shard].file_size);
        ASSERT_LE(r.region + r.length, store.slot_bytes());
        ASSERT_GE(files.read_window(r.shard, r.file_offset, r.length, arena.slot(0) + r.region), r.need);
      }
      const ExpertWeights got = store.view(l, e, arena.slot(0));
      const ExpertWeights want = resident.expert(l, e);
      ASSERT_TRUE(same_view(got.gate, want.gate)) << "layer " << l << " expert " << e;
      ASSERT_TRUE(same_view(got.up, want.up)) << "layer " << l << " expert " << e;
      ASSERT_TRUE(same_view(got.down, want.down)) << "layer " << l << " expert " << e;
      ASSERT_EQ(got.gate_bias == nullptr, want.gate_bias == nullptr);
      if (want.gate_bias != nullptr) {
        const auto F = static_cast<size_t>(sh.n_ff), D = static_cast<size_t>(sh.n_embd);
        EXPECT_EQ(std::memcmp(got.gate_bias, want.gate_bias, F * 4), 0);
        EXPECT_EQ(std::memcmp(got.up_bias, want.up_bias, F * 4), 0);
        EXPECT_EQ(std::memcmp(got.down_bias, want.down_bias, D * 4), 0);
      }
    }
  }
}

class ExpertStoreTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ExpertStoreTest, EverySlotHoldsTheFilesBytes) {
  const auto model = gguf::GgufModel::open(test::model_path(GetParam()));
  check_all_experts(model, true);
}

INSTANTIATE_TEST_SUITE_P(Oracle, ExpertStoreTest, ::testing::ValuesIn(test::moe_model_names()),
                         [](const auto& i) { return test::param_name(i.param); });

TEST(ExpertStore, SplitModelReadsAcrossShardsBufferedToo) {
  const auto src = gguf::GgufModel::open(test::model_path("tiny-gptoss-MXFP4"));
  const auto dir = moetier::test::tmp_dir("stream_split_store");
  const auto paths = gguf::write_split(src, dir, "gptoss", 3);
  const auto model = gguf::GgufModel::open(paths[0]);
  ASSERT_EQ(model.shards().size(), 3u);
  check_all_experts(model, true);
  check_all_experts(model, false);
}

TEST(ExpertStore, DenseModelIsRefusedWithItsName) {
  const auto model = gguf::GgufModel::open(moetier::test::oracle_dir() / "models" / "stories260K.gguf");
  try {
    ExpertStore s(model);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stories260K.gguf"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moetier::moe
