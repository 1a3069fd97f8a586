// The streaming store's warm start (StreamingExperts::warm) from the heat profile of an earlier run: it reads the
// hottest experts into the cache before the first token, so decode hits from its first step, and the logits and
// routing stay bit-identical to the resident run's (the warm reads deliver the file's bytes, as every read does).
#include <cstring>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "model/eval.h"
#include "moe/expert_store.h"
#include "moe/heat_profile.h"
#include "moe/streaming_experts.h"
#include "stream_test_util.h"
#include "util/error.h"

namespace moetier::moe {
namespace {

class PhaseHooks final : public model::StepHooks {
 public:
  explicit PhaseHooks(StreamingExperts* s) : s_(s) {}
  void begin(bool prefill) override { s_->set_phase(prefill ? Phase::prefill : Phase::decode); }
  void end(bool prefill, int64_t, double) override {
    const StreamCounters c = s_->end_step();
    if (!prefill) {
      decode_hits += c.hits;
      if (first_decode_hits < 0) first_decode_hits = static_cast<int64_t>(c.hits);
    }
  }
  uint64_t decode_hits = 0;
  int64_t first_decode_hits = -1;

 private:
  StreamingExperts* s_;
};

struct WarmRun {
  model::EvalResult result;
  HeatProfile heat;
  StreamingExperts::WarmStart warm;
  uint64_t decode_hits = 0;
  int64_t first_decode_hits = 0;
  uint64_t bytes_read = 0;
};

constexpr const char* kModel = "tiny-qwen3moe-Q4_K_M";  // 4 MoE layers x 16 experts, top-4
constexpr int64_t kSlotsPerLayer = 6;

WarmRun run(const model::TokenInput& t, const HeatProfile* from, bool pack = false) {
  const auto file = gguf::GgufModel::open(test::model_path(kModel));
  StreamingOptions so;
  so.pack_rows16 = pack;
  {
    const ExpertStore store(file);
    so.cache_bytes = store.slot_bytes() * static_cast<uint64_t>(kSlotsPerLayer * store.shape().n_moe_layers);
  }
  auto src = std::make_unique<StreamingExperts>(file, so);
  StreamingExperts* s = src.get();
  WarmRun r;
  if (from != nullptr) {
    s->seed_heat(*from);
    r.warm = s->warm(from->hottest());
  }
  const auto m = model::load_model(file, model::ModelOptions{.n_ctx = 128}, std::move(src));
  PhaseHooks hooks(s);
  r.result = model::evaluate(*m, t.tokens, t.n_prefill, &hooks);
  r.heat = s->heat();
  r.decode_hits = hooks.decode_hits;
  r.first_decode_hits = hooks.first_decode_hits;
  r.bytes_read = s->totals().bytes_read;
  // Once the run has fetched, a warm start is too late.
  EXPECT_THROW(s->warm(r.heat.hottest()), Error);
  return r;
}

TEST(StreamWarmStart, FromTheLastRunsHeatHitsFromTheFirstTokenBitIdentically) {
  const model::TokenInput t = test::oracle_tokens(kModel, "p1", 12);
  const int64_t n_decode = static_cast<int64_t>(t.tokens.size()) - t.n_prefill;
  ASSERT_GE(n_decode, 8);
  model::EvalResult resident;
  {
    const auto file = gguf::GgufModel::open(test::model_path(kModel));
    const auto m = model::load_model(file, model::ModelOptions{.n_ctx = 128});
    resident = model::evaluate(*m, t.tokens, t.n_prefill);
  }

  const WarmRun cold = run(t, nullptr);
  EXPECT_EQ(cold.warm.experts, 0);
  EXPECT_EQ(cold.heat.decode_tokens(), n_decode);  // evaluate() runs every token after the prompt one by one
  EXPECT_EQ(cold.heat.model().model, std::string(kModel) + ".gguf");
  EXPECT_EQ(cold.heat.model().n_expert, 16);

  const WarmRun warm = run(t, &cold.heat);
  const int64_t slots = kSlotsPerLayer * 4;
  EXPECT_EQ(warm.warm.experts, std::min<int64_t>(slots, static_cast<int64_t>(cold.heat.hottest().size())));
  EXPECT_GT(warm.warm.experts, 0);
  EXPECT_GE(warm.warm.bytes, static_cast<uint64_t>(warm.warm.experts));
  EXPECT_GT(warm.first_decode_hits, cold.first_decode_hits);
  EXPECT_GT(warm.decode_hits, cold.decode_hits);
  EXPECT_LT(warm.bytes_read, cold.bytes_read);  // the run's own reads, the warm start's not counted
  // The counts go on from the profile's.
  EXPECT_EQ(warm.heat.decode_tokens(), 2 * n_decode);

  for (const WarmRun* r : {&cold, &warm}) {
    ASSERT_EQ(r->result.logits.size(), resident.logits.size());
    EXPECT_EQ(std::memcmp(r->result.logits.data(), resident.logits.data(), resident.logits.size() * sizeof(float)), 0);
    EXPECT_EQ(r->result.routing, resident.routing);
  }
}

// With pack_rows16 the warm start repacks every expert it read (where this CPU has rows16 kernels for the model's
// expert types), the experts it warmed are delivered repacked from the first fetch, and the logits and routing stay
// the resident run's, bit for bit.
TEST(StreamWarmStart, RepackedInTheSlotsBitIdentically) {
  const model::TokenInput t = test::oracle_tokens(kModel, "p1", 8);
  model::EvalResult resident;
  {
    const auto file = gguf::GgufModel::open(test::model_path(kModel));
    const auto m = model::load_model(file, model::ModelOptions{.n_ctx = 128});
    resident = model::evaluate(*m, t.tokens, t.n_prefill);
  }
  const WarmRun cold = run(t, nullptr);
  const WarmRun warm = run(t, &cold.heat, true);
  ASSERT_GT(warm.warm.experts, 0);
  const auto file = gguf::GgufModel::open(test::model_path(kModel));
  const bool packs = ExpertStore(file).packing_slices() > 0;
  EXPECT_EQ(warm.warm.packed, packs ? warm.warm.experts : 0);
  EXPECT_EQ(warm.warm.pack_seconds > 0, packs);
  ASSERT_EQ(warm.result.logits.size(), resident.logits.size());
  EXPECT_EQ(std::memcmp(warm.result.logits.data(), resident.logits.data(), resident.logits.size() * sizeof(float)),
            0);
  EXPECT_EQ(warm.result.routing, resident.routing);

  // What the first fetch of layer 0 delivers: the warmed experts in the rows16 layout where they pack, each view
  // of the same shape as the file's.
  StreamingOptions so;
  so.cache_bytes = ExpertStore(file).slot_bytes() * 64;
  so.pack_rows16 = true;
  StreamingExperts s(file, so);
  std::vector<ExpertKey> layer0;
  for (const ExpertKey& k : cold.heat.hottest()) {
    if (k.layer == 0) layer0.push_back(k);
  }
  ASSERT_FALSE(layer0.empty());
  EXPECT_EQ(s.warm(layer0).packed, packs ? static_cast<int64_t>(layer0.size()) : 0);
  struct Layouts final : ExpertConsumer {
    void on_experts(std::span<const int32_t>, std::span<const ExpertWeights> w) override {
      for (const ExpertWeights& e : w) seen.push_back(e.gate.layout);
    }
    std::vector<quant::WeightLayout> seen;
  } got;
  std::vector<int32_t> ids;
  for (const ExpertKey& k : layer0) ids.push_back(k.expert);
  s.fetch(0, ids, got);
  ASSERT_EQ(got.seen.size(), ids.size());
  for (const quant::WeightLayout l : got.seen)
    EXPECT_EQ(l, packs ? quant::WeightLayout::rows16 : quant::WeightLayout::gguf);
  EXPECT_EQ(s.totals().hits, ids.size());
  EXPECT_EQ(s.totals().packed, 0u);  // the warm start's packing is its own
}

// A failed warm-start read is an error naming the file, after every read in flight has been collected; the store
// is unusable afterwards, as after any failed read.
TEST(StreamWarmStart, AFailedReadIsAnErrorNamingTheFile) {
  const model::TokenInput t = test::oracle_tokens(kModel, "p1", 4);
  const WarmRun cold = run(t, nullptr);
  const auto file = gguf::GgufModel::open(test::model_path(kModel));
  StreamingOptions so;
  so.cache_bytes = ExpertStore(file).slot_bytes() * 24;
  so.fail_read = 2;
  StreamingExperts s(file, so);
  try {
    s.warm(cold.heat.hottest());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("warm start of the expert cache"), std::string::npos) << what;
    EXPECT_NE(what.find(std::string(kModel) + ".gguf"), std::string::npos) << what;
  }
  EXPECT_EQ(s.engine().outstanding(), 0u);
  struct Sink final : ExpertConsumer {
    void on_experts(std::span<const int32_t>, std::span<const ExpertWeights>) override {}
  } sink;
  const int32_t e0 = 0;
  EXPECT_THROW(s.fetch(0, std::span<const int32_t>(&e0, 1), sink), Error);
}

}  // namespace
}  // namespace moetier::moe
