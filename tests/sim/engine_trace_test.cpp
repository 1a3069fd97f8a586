// Replay of the engine's own route traces (issue 27 item 7): a trace moetier records carries a `# cache` line
// (trace::TraceCache), and replay then counts as the expert store does: slots, strict capacity, the cliff guard,
// experts in ascending id order, prefill in chunks of n_batch tokens. For every deterministic policy the
// replayed residency must equal the recorded one on every row. The unit tests pin each modelled property on
// synthetic traces; the end-to-end tests run the built binary on the tiny oracle model.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_cli.h"
#include "sim/batches.h"
#include "sim/replay.h"
#include "trace/route_trace.h"
#include "trace/trace_fixture.h"

namespace moetier::test {
namespace {

// The distinct experts of a batch's rows, ascending.
std::vector<int32_t> distinct_ascending(const sim::BatchedTrace& t, const sim::Batch& b) {
  std::vector<int32_t> e;
  for (uint32_t i = b.row_begin; i < b.row_end; ++i) e.push_back(t.rows[i].expert);
  std::sort(e.begin(), e.end());
  e.erase(std::unique(e.begin(), e.end()), e.end());
  return e;
}

TEST(EngineTrace, PrefillRunsInChunksOfNBatchWithExpertsAscending) {
  trace::RouteTrace rt = synthetic_trace(2, 8, 2, 5, 2, 4096);
  // Without the cache line: the phone engine's one prefill pass, one batch per layer.
  const sim::BatchedTrace phone = sim::make_batches(rt);
  ASSERT_EQ(phone.steps.size(), 3u);
  EXPECT_EQ(phone.steps[0].batch_end - phone.steps[0].batch_begin, 2u);
  EXPECT_EQ(phone.steps[0].tokens, 5);

  // With it, n_batch = 2: positions {0, 1}, {2, 3}, {4} are three passes over the two layers.
  rt.header.cache = trace::TraceCache{4096, 2, true};
  const sim::BatchedTrace t = sim::make_batches(rt);
  ASSERT_EQ(t.steps.size(), 3u);
  const sim::Step& pre = t.steps[0];
  EXPECT_EQ(pre.phase, moe::Phase::prefill);
  EXPECT_EQ(pre.tokens, 5);
  EXPECT_EQ(t.prefill_tokens, 5);
  EXPECT_EQ(t.decode_tokens, 2);
  ASSERT_EQ(pre.batch_end - pre.batch_begin, 6u);
  const int32_t layers[] = {0, 1, 0, 1, 0, 1};
  const uint32_t rows_per_batch[] = {4, 4, 4, 4, 2, 2};  // tokens in the chunk x top-2
  for (uint32_t k = 0; k < 6; ++k) {
    const sim::Batch& b = t.batches[pre.batch_begin + k];
    SCOPED_TRACE(k);
    EXPECT_EQ(b.layer, layers[k]);
    EXPECT_EQ(b.row_end - b.row_begin, rows_per_batch[k]);
  }
  // Every batch (prefill chunks and decode tokens) lists its experts as the model asks the store: ascending.
  for (const sim::Batch& b : t.batches) {
    const std::vector<int32_t> got(t.experts.begin() + b.expert_begin, t.experts.begin() + b.expert_end);
    EXPECT_EQ(got, distinct_ascending(t, b));
  }
}

TEST(EngineTrace, ByteBudgetBuysWholeSlotsAndBelowOneSlotEveryLookupMisses) {
  constexpr uint64_t kSlot = 139264;  // bytes; an expert is 4096 bytes, so a byte budget would hold 34 per slot
  trace::RouteTrace rt = synthetic_trace(2, 8, 2, 3, 20, 4096);
  rt.header.cache = trace::TraceCache{kSlot, 512, false};
  const sim::BatchedTrace t = sim::make_batches(rt);
  sim::ReplayOptions o;
  o.cache_bytes = 3 * kSlot + kSlot - 1;
  sim::ReplayResult r = sim::replay(t, o);
  EXPECT_EQ(r.cache_entries, 3);
  sim::ReplayOptions by_entries;
  by_entries.cache_entries = 3;
  by_entries.strict = true;
  const sim::ReplayResult e = sim::replay(t, by_entries);
  EXPECT_EQ(r.prefill.hits, e.prefill.hits);
  EXPECT_EQ(r.decode.hits, e.decode.hits);
  EXPECT_GT(r.decode.hits, 0);

  o.cache_bytes = 1000 * kSlot;  // more slots than (layer, expert) pairs: capped, as the store caps its arena
  EXPECT_EQ(sim::replay(t, o).cache_entries, 16);

  o.cache_bytes = kSlot - 1;  // no slot: the store runs without a cache
  r = sim::replay(t, o);
  EXPECT_EQ(r.cache_entries, 0);
  EXPECT_EQ(r.prefill.hits + r.decode.hits, 0);
  EXPECT_GT(r.decode.lookups, 0);
  EXPECT_EQ(r.decode.miss_bytes, static_cast<uint64_t>(r.decode.lookups) * 4096);
}

// --- End to end: the engine records, replay reproduces. ---

std::filesystem::path tiny_model() { return oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf"; }

struct Agreement {
  double residency_match = 0;  // % of rows
  double hit_all = 0;          // replayed hit rate, %
  int64_t cache_experts = 0;   // the slots replay derived from --cache-mb
};

// Runs `moetier run` with a route trace, then `moetier replay` of that trace with the same policy and budget.
Agreement record_and_replay(const std::string& name, const std::string& run_args, const std::string& policy,
                            int mib) {
  const std::filesystem::path trace = tmp_dir("sim_engine_trace") / (name + ".route.csv");
  const CliResult run = run_cli("run -m " + tiny_model().string() + " " + run_args +
                                " --temp 0 --experts stream --cache-mb " + std::to_string(mib) + " --cache-policy " +
                                policy + " --route-trace " + trace.string());
  EXPECT_EQ(run.exit_code, 0) << run.output;
  const CliResult rep =
      run_cli("replay " + trace.string() + " --policy " + policy + " --cache-mb " + std::to_string(mib) + " --json");
  EXPECT_EQ(rep.exit_code, 0) << rep.output;
  if (rep.exit_code != 0) return {};
  const nlohmann::json j = nlohmann::json::parse(rep.output);
  return {j["residency_match"].get<double>(), j["hit_rate"]["all"].get<double>(), j["cache_experts"].get<int64_t>()};
}

// Every policy of `moetier run` but adaptive (whose background reads land when the drive delivers them) and
// static (which the engine runs without a hot list, so it caches nothing, while replay's static needs one).
// The tiny model has 4 MoE layers x 16 experts, top-4, slots of 0.14 MiB: 1 MiB is 7 slots, below one token's
// working set of 16 (the cliff guard engages), 3 MiB is 21 slots, above it. Both miss and hit.
TEST(EngineTrace, ReplayOfTheEnginesTraceAgreesOnEveryRow) {
  for (const char* policy : {"lru", "lfu", "lfu-decay", "reuse"}) {
    for (const int mib : {1, 3}) {
      for (const bool overlap : {true, false}) {
        const std::string name = std::string(policy) + "_" + std::to_string(mib) + (overlap ? "" : "_no_overlap");
        SCOPED_TRACE(name);
        const Agreement a = record_and_replay(
            name, std::string("-p \"Once upon a time\" -n 48") + (overlap ? "" : " --no-overlap"), policy, mib);
        EXPECT_EQ(a.cache_experts, mib == 1 ? 7 : 21);
        EXPECT_EQ(a.residency_match, 100.0);
        EXPECT_GT(a.hit_all, 0.0);
        EXPECT_LT(a.hit_all, 100.0);
      }
    }
  }
}

// A prompt longer than n_batch (512 tokens) is prefilled in two passes over the layers; replay must model them.
TEST(EngineTrace, ReplayAgreesOnAChunkedPrefill) {
  const std::filesystem::path tokens = tmp_dir("sim_engine_trace") / "prompt_520.json";
  {
    std::ofstream out(tokens);
    out << '[';
    for (int i = 0; i < 520; ++i) out << (i ? "," : "") << (1 + (i * 37) % 500);
    out << "]\n";
  }
  for (const char* policy : {"lru", "lfu"}) {
    SCOPED_TRACE(policy);
    const Agreement a = record_and_replay(std::string("chunked_") + policy,
                                          "--tokens " + tokens.string() + " -n 8 -c 600", policy, 1);
    EXPECT_EQ(a.residency_match, 100.0);
    EXPECT_GT(a.hit_all, 0.0);
  }
}

}  // namespace
}  // namespace moetier::test
