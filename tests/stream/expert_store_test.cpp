// The expert store's read layout: every expert of every oracle MoE model, read into a slot through the aligned
// windows, views exactly the bytes the resident source maps (weights and biases), for single-file and split
// models; and the slot arena is sized for the largest layer.
#include <cstdint>
#include <cstring>
#include <string_view>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "gguf/writer.h"
#include "moe/expert_store.h"
#include "moe/io/model_files.h"
#include "moe/resident_experts.h"
#include "moe/slot_arena.h"
#include "quant/kernels/int8_kernels.h"
#include "quant/repack.h"
#include "stream_test_util.h"
#include "util/error.h"

namespace moetier::moe {
namespace {

bool same_view(const quant::WeightView& a, const quant::WeightView& b) {
  return a.type == b.type && a.rows == b.rows && a.cols == b.cols && a.row_bytes == b.row_bytes &&
         std::memcmp(a.data, b.data, static_cast<size_t>(a.rows) * a.row_bytes) == 0;
}

io::ModelFiles open_files(const gguf::GgufModel& model, bool direct) {
  std::vector<std::filesystem::path> paths;
  for (const auto& s : model.shards()) paths.push_back(s.path);
  return io::ModelFiles(paths, io::FileOptions{direct, {}});
}

void check_all_experts(const gguf::GgufModel& model, bool direct) {
  const ExpertStore store(model);
  const ExpertShape& sh = store.shape();
  const ResidentExperts resident(model, sh);
  const io::ModelFiles files = open_files(model, direct);
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

// The rows16 repack in the slot: every expert of the model read into a slot and packed there views, for each
// matrix that packs, exactly the bytes of the scalar specification's repack (quant::repack_rows16) of the file's
// matrix, and for each other slice the file's bytes. Which slices pack follows the CPU's rows16 kernels.
void check_packed_experts(const gguf::GgufModel& model) {
  const ExpertStore store(model);
  const ExpertShape& sh = store.shape();
  const ResidentExperts resident(model, sh);
  const io::ModelFiles files = open_files(model, true);
  const SlotArena arena(store.slot_bytes(), 1, 0);
  std::vector<uint8_t> scratch(store.pack_scratch_bytes());
  int64_t packing = 0;
  for (int64_t l = 0; l < sh.n_moe_layers; ++l) {
    const auto fits = [](const quant::WeightView& w) {
      return quant::rows16_layout_fits(w.type, w.rows, w.cols) && quant::kernels::has_rows16_kernel(w.type);
    };
    for (int s = 0; s < store.n_slices(l); ++s) packing += store.packs(l, s) ? 1 : 0;
    for (int32_t e = 0; e < sh.n_expert; ++e) {
      std::memset(arena.slot(0), 0xAB, arena.slot_bytes());
      for (int s = 0; s < store.n_slices(l); ++s) {
        const SliceRead r = store.slice_read(l, e, s);
        ASSERT_GE(files.read_window(r.shard, r.file_offset, r.length, arena.slot(0) + r.region), r.need);
      }
      const uint64_t bytes = store.pack_rows16(l, e, arena.slot(0), scratch.data());
      const ExpertWeights got = store.view(l, e, arena.slot(0), quant::WeightLayout::rows16);
      const ExpertWeights want = resident.expert(l, e);
      uint64_t want_bytes = 0;
      for (const auto& [g, w, name] : {std::tuple{got.gate, want.gate, "gate"}, {got.up, want.up, "up"},
                                       {got.down, want.down, "down"}}) {
        const std::string where = fmt::format("layer {} expert {} {}", l, e, name);
        ASSERT_EQ(g.layout == quant::WeightLayout::rows16, fits(w)) << where;
        ASSERT_EQ(g.type, w.type) << where;
        ASSERT_EQ(g.rows, w.rows) << where;
        ASSERT_EQ(g.cols, w.cols) << where;
        const size_t n = static_cast<size_t>(w.rows) * w.row_bytes;
        if (g.layout == quant::WeightLayout::gguf) {
          ASSERT_EQ(std::memcmp(g.data, w.data, n), 0) << where;
          continue;
        }
        want_bytes += n;
        // gate, up and down each start their page-aligned region, a merged gate_up's up half n_ff rows into it
        const bool at_region = !(sh.merged_gate_up && std::string_view(name) == "up");
        if (at_region) EXPECT_EQ(reinterpret_cast<uintptr_t>(g.data) % io::kPage, 0u) << where;
        std::vector<uint8_t> spec(n);
        quant::repack_rows16(w.type, w.data, w.row_bytes, w.cols, 0, w.rows / quant::kRows16, spec.data());
        ASSERT_EQ(std::memcmp(g.data, spec.data(), n), 0) << where;
      }
      ASSERT_EQ(bytes, want_bytes) << "layer " << l << " expert " << e;
      ASSERT_EQ(got.gate_bias == nullptr, want.gate_bias == nullptr);
      if (want.gate_bias != nullptr) {
        const auto F = static_cast<size_t>(sh.n_ff) * 4, D = static_cast<size_t>(sh.n_embd) * 4;
        EXPECT_EQ(std::memcmp(got.gate_bias, want.gate_bias, F), 0);
        EXPECT_EQ(std::memcmp(got.up_bias, want.up_bias, F), 0);
        EXPECT_EQ(std::memcmp(got.down_bias, want.down_bias, D), 0);
      }
    }
  }
  EXPECT_EQ(packing, store.packing_slices());
  EXPECT_EQ(store.pack_scratch_bytes() > 0, packing > 0);
}

class ExpertStoreTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ExpertStoreTest, PackedSlotsHoldTheRows16RepackOfTheFilesBytes) {
  const auto model = gguf::GgufModel::open(test::model_path(GetParam()));
  check_packed_experts(model);
}

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
