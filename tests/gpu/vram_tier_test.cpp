// The VRAM expert tier (moe/vram_tier.h, model/gpu_blocks.h's tiered MoE block) on the oracle's MoE models of the
// architectures whose step runs on the GPU, on the first Vulkan device (lavapipe in CI) under the validation layer
// with synchronization validation:
//   - slots for every expert: each expert is copied into a slot on first use and computed from there, with the
//     bits of -ngl 99's placed stacks (the same kernels over the same bytes);
//   - a tier of 1 MiB (a few slots of the 64 experts) with a swap pass every round, its misses all on the CPU or
//     over PCIe while staging slots last: the oracle's tolerances over every case, the tier's accounting (every
//     lookup a hit, a fill or a miss; the lookups are the distinct experts each step's layers routed to; never
//     more experts held than slots), swaps that land, and a second model of the same settings gives the same bits
//     (a fixed sequence of placements).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "gguf/gguf.h"
#include "gpu/gpu.h"
#include "model/eval.h"
#include "model/model.h"
#include "model/token_input.h"
#include "moe/vram_tier.h"
#include "oracle_cases.h"
#include "test_support.h"
#include "util/error.h"

namespace moetier::model {
namespace {

const char* const kModels[] = {"tiny-qwen3moe-Q4_K_M", "tiny-mixtral-Q4_0", "tiny-gptoss-MXFP4"};

class VramTierTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override { setenv("MOETIER_VULKAN_VALIDATION", "sync", 1); }
};

ModelOptions tier_options(int64_t mib, int32_t adapt_every, moe::MissRoute misses = moe::MissRoute::cpu) {
  ModelOptions o;
  o.n_ctx = 512;
  o.n_gpu_layers = 99;
  o.experts_vram_mib = mib;
  o.vram_misses = misses;
  if (mib != 0) {
    o.vram_policy = [adapt_every](int64_t, int64_t) {
      moe::PolicyParams p;
      p.adapt_every = adapt_every;
      p.adapt_swaps = 8;
      return p;
    };
  }
  return o;
}

// The distinct experts each (step, MoE layer) routed to, summed: the tier's lookups. A step is the prefill of
// n_prefill rows, then one row each.
uint64_t distinct_lookups(const EvalResult& r, int64_t n_prefill) {
  uint64_t n = 0;
  const int64_t L = r.n_moe_layers, K = r.n_expert_used;
  const auto add = [&](int64_t row0, int64_t rows) {
    for (int64_t l = 0; l < L; ++l) {
      std::set<int32_t> seen;
      for (int64_t t = row0; t < row0 + rows; ++t) {
        for (int64_t k = 0; k < K; ++k) seen.insert(r.routing[static_cast<size_t>((t * L + l) * K + k)]);
      }
      n += seen.size();
    }
  };
  add(0, n_prefill);
  for (int64_t t = n_prefill; t < r.n_rows; ++t) add(t, 1);
  return n;
}

TEST_P(VramTierTest, SlotsForEveryExpertGiveTheBitsOfPlacedStacks) {
  const std::string name = GetParam();
  const uint64_t errors_before = gpu::validation_errors_in_process();
  const gguf::GgufModel file = gguf::GgufModel::open(test::oracle_model(name));
  const TokenInput p1 = read_token_input(test::oracle_ref(test::reference_for(name), "p1").string(), 0);
  const auto placed = load_model(file, tier_options(0, 1));
  const EvalResult want = evaluate(*placed, p1.tokens, p1.n_prefill);
  const auto tiered = load_model(file, tier_options(64, 1));  // 64 MiB: more than every expert
  ASSERT_NE(tiered->vram_tier(), nullptr);
  const moe::VramTier& tier = *tiered->vram_tier();
  EXPECT_EQ(tier.n_slots(), tiered->info().n_moe_layers * tiered->info().n_expert) << tiered->info().experts_vram;
  engine::StreamStepHooks hooks(nullptr, nullptr, tiered->vram_tier());
  const EvalResult got = evaluate(*tiered, p1.tokens, p1.n_prefill, &hooks);
  ASSERT_EQ(got.logits.size(), want.logits.size());
  EXPECT_EQ(0, std::memcmp(got.logits.data(), want.logits.data(), got.logits.size() * sizeof(float)))
      << name << ": the tier's logits differ from the placed stacks'";
  const moe::SlotTierCounters& c = tier.book().counters();
  EXPECT_EQ(c.misses_slow, 0u);
  EXPECT_EQ(c.lookups, distinct_lookups(got, p1.n_prefill));
  EXPECT_EQ(c.lookups, c.hits + c.fills);
  EXPECT_EQ(static_cast<int64_t>(c.fills), tier.book().policy().resident_entries());
  EXPECT_EQ(gpu::validation_errors_in_process(), errors_before) << "the validation layer reported errors";
}

// Misses on the CPU (--vram-misses cpu) or over PCIe while staging slots last (pcie): each a fixed placement.
class VramTierSplitTest : public ::testing::TestWithParam<std::tuple<const char*, moe::MissRoute>> {
 protected:
  void SetUp() override { setenv("MOETIER_VULKAN_VALIDATION", "sync", 1); }
};

TEST_P(VramTierSplitTest, AFewSlotsWithSwapsStayWithinTheOracleTolerance) {
  const std::string name = std::get<0>(GetParam());
  const moe::MissRoute route = std::get<1>(GetParam());
  const uint64_t errors_before = gpu::validation_errors_in_process();
  const gguf::GgufModel file = gguf::GgufModel::open(test::oracle_model(name));
  const auto model = load_model(file, tier_options(1, 1, route));
  moe::VramTier* tier = model->vram_tier();
  ASSERT_NE(tier, nullptr);
  const int64_t total = model->info().n_moe_layers * model->info().n_expert;
  ASSERT_LT(tier->n_slots(), total) << model->info().experts_vram;
  engine::StreamStepHooks hooks(nullptr, nullptr, tier);
  const std::vector<test::OracleCase> cases = test::run_oracle_cases(*model, test::reference_for(name), &hooks);
  ASSERT_EQ(cases.size(), 3u);
  uint64_t lookups = 0;
  for (const test::OracleCase& c : cases) {
    const TokenInput in = read_token_input(test::oracle_ref(test::reference_for(name), c.prompt).string(), 0);
    lookups += distinct_lookups(c.result, in.n_prefill);
    fmt::print("  {:<22} {} slots of {}  {:<6} mean rel {:.2e}  argmax {:>3}/{:<3}\n", name, tier->n_slots(), total,
               c.prompt, c.logits.mean_rel, c.logits.argmax_same, c.logits.n_rows);
  }
  const moe::SlotTierCounters& k = tier->book().counters();
  const moe::VramTierStats& st = tier->stats();
  fmt::print("  lookups {} = hits {} + fills {} + misses {} ({} over PCIe); swaps {} planned, {} landed\n",
             k.lookups, k.hits, k.fills, k.misses_slow, st.staged, k.swaps_planned, k.swaps_landed);
  EXPECT_EQ(k.lookups, lookups);
  EXPECT_EQ(k.lookups, k.hits + k.fills + k.misses_slow);
  EXPECT_GT(k.misses_slow, 0u);
  EXPECT_GT(tier->n_stage(), 0);
  if (route == moe::MissRoute::cpu) {
    EXPECT_EQ(st.staged, 0u);
  } else {
    EXPECT_GT(st.staged, 0u);  // every layer's misses fill the staging slots first
    EXPECT_LE(st.staged, k.misses_slow);
  }
  EXPECT_GT(k.hits, 0u);
  EXPECT_GT(k.swaps_landed, 0u) << "a pass every round over routing that moves should swap";
  EXPECT_LE(k.swaps_landed, k.swaps_planned);
  EXPECT_LE(tier->book().policy().resident_entries(), tier->n_slots());
  EXPECT_EQ(gpu::validation_errors_in_process(), errors_before) << "the validation layer reported errors";
  const test::OracleTotals t = test::oracle_totals(cases);
  if (const char* problem = test::reference_problem(name))
    GTEST_SKIP() << name << ": mean rel " << t.mean_rel << " not judged: " << problem;
  test::expect_within_oracle_tolerance(t, file, name);

  // The same settings on a fresh model: the same fills, swaps and splits, so the same bits.
  const auto again = load_model(file, tier_options(1, 1, route));
  engine::StreamStepHooks hooks2(nullptr, nullptr, again->vram_tier());
  const std::vector<test::OracleCase> cases2 = test::run_oracle_cases(*again, test::reference_for(name), &hooks2);
  ASSERT_EQ(cases2.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(cases2[i].result.logits.data(), cases[i].result.logits.data(),
                             cases[i].result.logits.size() * sizeof(float)))
        << name << " " << cases[i].prompt << ": a second model of the same settings gave other logits";
  }
}

// Each architecture once, and both routes on one of them (the suite runs in CI on two cores).
INSTANTIATE_TEST_SUITE_P(Gpu, VramTierSplitTest,
                         ::testing::Values(std::tuple{kModels[0], moe::MissRoute::cpu},
                                           std::tuple{kModels[0], moe::MissRoute::pcie},
                                           std::tuple{kModels[1], moe::MissRoute::cpu},
                                           std::tuple{kModels[2], moe::MissRoute::pcie}),
                         [](const ::testing::TestParamInfo<std::tuple<const char*, moe::MissRoute>>& info) {
                           std::string s = std::string(std::get<0>(info.param)) + "_" +
                                           std::string(moe::miss_route_name(std::get<1>(info.param)));
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

INSTANTIATE_TEST_SUITE_P(Gpu, VramTierTest, ::testing::ValuesIn(kModels),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

TEST(VramTierErrors, NeedsTheStepOnTheGpuAndResidentExperts) {
  const gguf::GgufModel file = gguf::GgufModel::open(test::oracle_model("tiny-qwen3moe-Q4_K_M"));
  ModelOptions o = tier_options(1, 1);
  o.n_gpu_layers = 0;
  EXPECT_THROW(load_model(file, o), Error);
  o = tier_options(-2, 1);
  EXPECT_THROW(load_model(file, o), Error);
  const gguf::GgufModel dense = gguf::GgufModel::open(test::oracle_model("stories260K"));
  EXPECT_THROW(load_model(dense, tier_options(1, 1)), Error);
}

}  // namespace
}  // namespace moetier::model
