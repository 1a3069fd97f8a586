// Telemetry: per-step counters (end_step) add up to the totals, hits and misses count each delivered expert once,
// and bytes read cover the experts read.
#include <memory>

#include <gtest/gtest.h>

#include "moe/streaming_experts.h"
#include "stream_test_util.h"

namespace moetier::moe {
namespace {

TEST(StreamCounters, StepsSumToTotalsAndCountEveryExpert) {
  const std::string name = "micro-qwen3moe-F16";
  const auto file = gguf::GgufModel::open(test::model_path(name));
  StreamingOptions so;
  so.cache_bytes = 0;
  {
    const ExpertStore store(file);
    so.cache_bytes = store.slot_bytes() * static_cast<uint64_t>(2 * store.shape().n_moe_layers);
  }
  auto src = std::make_unique<StreamingExperts>(file, so);
  StreamingExperts* s = src.get();
  const auto m = model::load_model(file, model::ModelOptions{.n_ctx = 64}, std::move(src));
  const auto t = test::oracle_tokens(name, "p1", 4);
  const int64_t V = m->info().n_vocab, L = m->info().n_moe_layers, K = m->info().n_expert_used;
  std::vector<float> logits(static_cast<size_t>(t.n_prefill * V));
  std::vector<int32_t> routing(static_cast<size_t>(t.n_prefill * L * K));

  s->set_phase(Phase::prefill);
  m->forward({t.tokens.data(), static_cast<size_t>(t.n_prefill)}, 0, {logits.data(), static_cast<size_t>(V)},
             model::LogitsMode::last, routing);
  StreamCounters sum = s->end_step();
  // Prefill: one fetch per layer over the batch's distinct experts.
  uint64_t distinct = 0;
  for (int64_t l = 0; l < L; ++l) {
    std::vector<bool> used(static_cast<size_t>(m->info().n_expert));
    for (int64_t i = 0; i < t.n_prefill; ++i)
      for (int64_t k = 0; k < K; ++k) used[static_cast<size_t>(routing[static_cast<size_t>((i * L + l) * K + k)])] = true;
    for (bool u : used) distinct += u ? 1 : 0;
  }
  EXPECT_EQ(sum.hits + sum.misses, distinct);
  EXPECT_GE(sum.bytes_read, sum.misses * s->store().max_expert_bytes() / 2);

  s->set_phase(Phase::decode);
  for (int64_t p = t.n_prefill; p < static_cast<int64_t>(t.tokens.size()); ++p) {
    m->forward({&t.tokens[static_cast<size_t>(p)], 1}, p, {logits.data(), static_cast<size_t>(V)},
               model::LogitsMode::last);
    const StreamCounters step = s->end_step();
    EXPECT_EQ(step.hits + step.misses, static_cast<uint64_t>(L * K));  // one token: k distinct experts per layer
    sum += step;
  }
  const StreamCounters& tot = s->totals();
  EXPECT_EQ(sum.hits, tot.hits);
  EXPECT_EQ(sum.misses, tot.misses);
  EXPECT_EQ(sum.evictions, tot.evictions);
  EXPECT_EQ(sum.bytes_read, tot.bytes_read);
  EXPECT_EQ(sum.reread_bytes, tot.reread_bytes);
  EXPECT_NEAR(sum.io_ms, tot.io_ms, 1e-6);
  EXPECT_GT(tot.evictions, 0u);
  EXPECT_LE(s->resident_bytes(), static_cast<uint64_t>(s->cache_slots()) * s->store().max_expert_bytes());
  EXPECT_FALSE(s->describe().empty());
}

}  // namespace
}  // namespace moetier::moe
