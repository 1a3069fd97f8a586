// Live telemetry of `moetier serve` (telemetry/live_stats.h): on the oracle's tiny qwen3moe, streamed through a
// 1 MiB cache (so lookups miss and evict) and resident, a real Generator with routing recorded. The counts must
// add up: each token routes n_expert_used experts per MoE layer, hits + misses per layer are the store's own
// lookups, and the totals are the RunRecorder's for the same steps.
#include <atomic>
#include <numeric>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "model/generator.h"
#include "sample/sampler.h"
#include "telemetry/live_stats.h"
#include "telemetry/run_metrics.h"
#include "test_support.h"
#include "util/error.h"

namespace moetier::telemetry {
namespace {

std::string model_path() { return (test::oracle_dir() / "models/tiny-qwen3moe-Q4_K_M.gguf").string(); }

engine::EngineConfig config(moe::Placement placement, std::string policy = "lru") {
  engine::EngineConfig c;
  c.model = model_path();
  c.threads = 2;
  c.n_ctx = 96;
  c.n_batch = 8;  // the 20-token prompt runs in three forward passes: one step, several lookups per layer
  c.placement = placement;
  c.cache_mib = 1;
  c.cache_policy = std::move(policy);
  c.log = [](std::string_view) {};
  return c;
}

const std::vector<int32_t> kPrompt{1, 17, 230, 41, 99, 5, 123, 77, 250, 3, 64, 12, 8, 200, 31, 45, 19, 2, 90, 111};
constexpr int kDecode = 24;

// Prefill of kPrompt and kDecode greedy tokens through `hooks`, with routing recorded.
void generate(engine::Engine& e, model::StepHooks& hooks) {
  sample::SamplerParams p;
  p.temperature = 0;
  sample::Sampler sampler(p, e.info().n_vocab);
  model::Generator g(e.model(), sampler, &hooks);
  g.record_routing();
  ASSERT_TRUE(g.prefill(kPrompt));
  for (int i = 0; i < kDecode; ++i) g.decode(g.sample());
}

uint64_t layer_sum(const std::vector<uint32_t>& routed, int64_t l, int64_t n_expert) {
  const auto b = routed.begin() + l * n_expert;
  return std::accumulate(b, b + n_expert, uint64_t{0});
}

void check_streamed(const std::string& policy) {
  SCOPED_TRACE(policy);
  const auto e = engine::load_engine(config(moe::Placement::stream, policy));
  ASSERT_NE(e->stream(), nullptr);
  const auto& info = e->info();
  const int64_t L = info.n_moe_layers, E = info.n_expert, K = info.n_expert_used;
  ASSERT_GT(L, 0);
  // Every step in the long window, the last four in the short one; the short one wraps the long one, which wraps
  // the engine's recorder (which drives the store).
  LiveStats all(e->hooks(), e->stream(), info, 64);
  LiveStats last4(&all, e->stream(), info, 4);
  generate(*e, last4);
  const RunSummary rec = summarize(e->recorder().rows(), -1, -1);
  const LiveSnapshot s = all.snapshot();
  const LiveSnapshot w = last4.snapshot();

  // Totals are the recorder's, step for step.
  EXPECT_EQ(s.total.steps, static_cast<int64_t>(e->recorder().rows().size()));
  EXPECT_EQ(s.total.steps, 1 + kDecode);
  EXPECT_EQ(s.total.prefill_tokens, rec.prefill_tokens);
  EXPECT_EQ(s.total.decode_tokens, rec.decode_tokens);
  EXPECT_EQ(s.total.prefill_tokens, static_cast<int64_t>(kPrompt.size()));
  EXPECT_EQ(s.total.decode_tokens, kDecode);
  EXPECT_DOUBLE_EQ(s.total.prefill_ms, rec.prefill_ms);
  EXPECT_NEAR(s.total.decode_ms, rec.decode_ms, 1e-9 * rec.decode_ms);
  EXPECT_EQ(s.total.hits, rec.hits);
  EXPECT_EQ(s.total.misses, rec.misses);
  EXPECT_EQ(s.total.read_bytes, rec.read_bytes);
  EXPECT_DOUBLE_EQ(static_cast<double>(s.total.decode_read_bytes), rec.decode_read_bytes);
  EXPECT_NEAR(s.total.stall_ms, rec.stall_ms, 1e-9 * (1 + rec.stall_ms));
  EXPECT_EQ(static_cast<int64_t>(s.total.swaps), std::max<int64_t>(rec.swaps, 0));
  EXPECT_GT(s.total.misses, 0u) << "a 1 MiB cache must miss";
  EXPECT_GT(s.total.hits, 0u) << "and hit: the layers' hot experts stay";
  if (policy == "adaptive") EXPECT_EQ(static_cast<int64_t>(s.total.swaps), rec.swaps);
  EXPECT_GT(s.total.read_bytes, 0u);
  // The long window holds every step: its recent figures are the totals.
  EXPECT_EQ(s.window_steps, s.total.steps);
  EXPECT_EQ(s.recent.hits, s.total.hits);
  EXPECT_EQ(s.recent.read_bytes, s.total.read_bytes);

  // Routing: n_expert_used experts per token per layer; the per-layer lookups are the store's (its hits and
  // misses are counted by fetch(), the routed counts by the generator's routing buffer).
  ASSERT_EQ(s.routed.size(), static_cast<size_t>(L * E));
  ASSERT_EQ(s.layer_hits.size(), static_cast<size_t>(L));
  uint64_t lookups = 0, misses = 0;
  for (int64_t l = 0; l < L; ++l) {
    EXPECT_EQ(layer_sum(s.routed, l, E), static_cast<uint64_t>((s.total.prefill_tokens + kDecode) * K)) << l;
    lookups += s.layer_hits[static_cast<size_t>(l)] + s.layer_misses[static_cast<size_t>(l)];
    misses += s.layer_misses[static_cast<size_t>(l)];
    // A pass asks once per distinct expert: no more lookups than routed choices, at least K per pass.
    EXPECT_LE(s.layer_hits[static_cast<size_t>(l)] + s.layer_misses[static_cast<size_t>(l)],
              layer_sum(s.routed, l, E));
  }
  EXPECT_EQ(lookups, s.total.hits + s.total.misses);
  EXPECT_EQ(misses, s.total.misses);

  // The short window: the last four decode tokens, K distinct experts per layer each.
  EXPECT_EQ(w.window_steps, 4);
  EXPECT_EQ(w.recent.steps, 4);
  EXPECT_EQ(w.recent.decode_tokens, 4);
  EXPECT_EQ(w.recent.prefill_tokens, 0);
  EXPECT_EQ(w.last_prefill_tokens, static_cast<int64_t>(kPrompt.size()));
  EXPECT_DOUBLE_EQ(w.last_prefill_ms, s.total.prefill_ms);
  uint64_t w_lookups = 0;
  for (int64_t l = 0; l < L; ++l) {
    EXPECT_EQ(layer_sum(w.routed, l, E), static_cast<uint64_t>(4 * K)) << l;
    EXPECT_EQ(w.layer_hits[static_cast<size_t>(l)] + w.layer_misses[static_cast<size_t>(l)],
              static_cast<uint64_t>(4 * K))
        << l;
    w_lookups += w.layer_hits[static_cast<size_t>(l)] + w.layer_misses[static_cast<size_t>(l)];
  }
  EXPECT_EQ(w_lookups, w.recent.hits + w.recent.misses);
  // The recorder's last four rows are the short window.
  const auto rows = e->recorder().rows();
  uint64_t h4 = 0, m4 = 0, b4 = 0;
  for (size_t i = rows.size() - 4; i < rows.size(); ++i) h4 += rows[i].hits, m4 += rows[i].misses, b4 += rows[i].read_bytes;
  EXPECT_EQ(w.recent.hits, h4);
  EXPECT_EQ(w.recent.misses, m4);
  EXPECT_EQ(w.recent.read_bytes, b4);

  // Tiers: the cache's slots and what they hold now.
  EXPECT_TRUE(s.has_cache);
  EXPECT_TRUE(s.streamed);
  EXPECT_EQ(s.cache_capacity_bytes,
            static_cast<uint64_t>(e->stream()->cache_slots()) * e->stream()->slot_bytes());
  EXPECT_GT(s.cache_capacity_bytes, 0u);
  EXPECT_EQ(s.cache_resident_bytes, e->stream()->resident_bytes());
  EXPECT_LE(s.cache_resident_bytes, s.cache_capacity_bytes);
  EXPECT_GE(s.last_step_age_s, 0.0);
}

TEST(LiveStats, StreamedCountsAddUpAndMatchTheRecorder) { check_streamed("lru"); }
TEST(LiveStats, AdaptiveTierCountsAddUpAndMatchTheRecorder) { check_streamed("adaptive"); }

TEST(LiveStats, ResidentExpertsHaveNoCacheAndNoMisses) {
  const auto e = engine::load_engine(config(moe::Placement::resident));
  ASSERT_EQ(e->stream(), nullptr);
  const auto& info = e->info();
  const int64_t L = info.n_moe_layers, E = info.n_expert, K = info.n_expert_used;
  LiveStats live(e->hooks(), nullptr, info, 8);
  const uint64_t mapped = routed_expert_bytes(e->file());
  live.set_mapped_expert_bytes(mapped);
  EXPECT_EQ(live.snapshot().last_step_age_s, -1.0);
  generate(*e, live);
  const LiveSnapshot s = live.snapshot();
  EXPECT_FALSE(s.has_cache);
  EXPECT_FALSE(s.streamed);
  EXPECT_EQ(s.total.hits, 0u);
  EXPECT_EQ(s.total.misses, 0u);
  EXPECT_EQ(s.total.read_bytes, 0u);
  EXPECT_EQ(s.cache_capacity_bytes, 0u);
  // The mapped tier: the experts' tensors, a large part of the file but not all of it (attention, embeddings).
  EXPECT_EQ(s.mapped_expert_bytes, mapped);
  EXPECT_GT(mapped, 0u);
  EXPECT_LT(mapped, std::filesystem::file_size(model_path()));
  EXPECT_EQ(s.window_steps, 8);
  EXPECT_EQ(s.recent.decode_tokens, 8);
  EXPECT_EQ(s.total.steps, 1 + kDecode);
  for (int64_t l = 0; l < L; ++l) {
    EXPECT_EQ(s.layer_misses[static_cast<size_t>(l)], 0u);
    EXPECT_EQ(s.layer_hits[static_cast<size_t>(l)], static_cast<uint64_t>(8 * K)) << "every lookup is in memory";
    EXPECT_EQ(layer_sum(s.routed, l, E), static_cast<uint64_t>(8 * K));
  }
}

// snapshot() from another thread while the engine runs: each snapshot is consistent (the window never holds more
// than it can, the steps only grow, the heat map sums to the window's tokens).
TEST(LiveStats, SnapshotsFromAnotherThreadAreConsistent) {
  const auto e = engine::load_engine(config(moe::Placement::stream));
  const auto& info = e->info();
  LiveStats live(e->hooks(), e->stream(), info, 4);
  std::atomic<bool> done{false};
  int64_t bad = 0, polls = 0;
  std::thread poller([&] {
    int64_t last = 0;
    while (!done.load() && polls < 100000) {
      const LiveSnapshot s = live.snapshot();
      ++polls;
      const uint64_t tokens = static_cast<uint64_t>(s.recent.prefill_tokens + s.recent.decode_tokens);
      if (s.total.steps < last || s.window_steps > 4 || s.window_steps != s.recent.steps ||
          layer_sum(s.routed, 0, info.n_expert) != tokens * static_cast<uint64_t>(info.n_expert_used))
        ++bad;
      last = s.total.steps;
    }
  });
  generate(*e, live);
  done = true;
  poller.join();
  EXPECT_GT(polls, 0);
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(live.snapshot().total.steps, 1 + kDecode);
}

TEST(LiveStats, WindowMustHoldAStep) {
  model::ModelInfo info;
  EXPECT_THROW(LiveStats(nullptr, nullptr, info, 0), Error);
}

}  // namespace
}  // namespace moetier::telemetry
