// The gate of expert streaming: for every oracle MoE model, a streamed run's logits and routing are bit-identical
// (memcmp) to the resident run's, whatever the cache size (none, one or two experts per layer: constant eviction,
// all experts), lanes, engine, overlap, direct I/O, dense policy, the next-layer prefetch, or split into three
// shards; and a streamed run meets the oracle's tolerances.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gguf/writer.h"
#include "moe/dense_weights.h"
#include "moe/expert_store.h"
#include "moe/streaming_experts.h"
#include "oracle_cases.h"
#include "stream_test_util.h"

namespace moetier::moe {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kAll = -1;  // cache_per_layer value: room for every expert

struct Config {
  int64_t cache_per_layer = 0;  // cache slots per layer (times n_moe_layers in all), or kAll
  int lanes = 4;
  io::EngineKind engine = io::EngineKind::pread_pool;
  bool overlap = true;
  bool direct = true;
  DensePolicy dense = DensePolicy::mmap;
  bool prefetch = false;  // the next-layer prefetch: n_expert_used ahead slots, guesses from the model
  // Cached experts repacked in their slots (StreamingOptions::pack_rows16): off, or every waiting one at the end of
  // each fetch (pack_at_fetch_end: every hit after an expert's first repacked). The engine's own timing, in
  // prefill's read waits, is slot_pack_test.cpp's.
  enum class Pack { off, every_fetch } pack = Pack::off;

  std::string name() const {
    return fmt::format("cache{}_{}x{}_{}_{}_{}{}{}",
                       cache_per_layer == kAll ? std::string("all") : std::to_string(cache_per_layer), lanes,
                       io::engine_name(engine), overlap ? "overlap" : "serial", direct ? "direct" : "buffered",
                       dense_policy_name(dense), prefetch ? "_prefetch" : "",
                       pack == Pack::off ? "" : "_pack");
  }
};

struct StreamRun {
  model::EvalResult result;
  StreamCounters counters;
  int64_t cache_slots = 0;
  bool packs = false;         // StreamingExperts::packs()
  std::string prefetch_note;  // ModelInfo::expert_prefetch
  int64_t one_token_passes = 0;  // forward passes of one token (those guess the next layers' experts)
};

const model::TokenInput& tokens_of(const std::string& name) {
  static std::map<std::string, model::TokenInput> cache;
  auto it = cache.find(name);
  // The prompt as one batch and a short decode tail: both paths run, and the whole matrix stays fast.
  if (it == cache.end()) it = cache.emplace(name, test::oracle_tokens(name, "p1", 4)).first;
  return it->second;
}

model::ModelOptions model_options() {
  model::ModelOptions o;
  o.n_ctx = 128;
  return o;
}

const model::EvalResult& resident_run(const std::string& name) {
  static std::map<std::string, model::EvalResult> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    const auto file = gguf::GgufModel::open(test::model_path(name));
    const auto m = model::load_model(file, model_options());
    const auto& t = tokens_of(name);
    it = cache.emplace(name, model::evaluate(*m, t.tokens, t.n_prefill)).first;
  }
  return it->second;
}

StreamRun streamed_run(const fs::path& path, const std::string& name, const Config& c) {
  const auto file = gguf::GgufModel::open(path);
  StreamingOptions so;
  {
    const ExpertStore store(file);
    const int64_t per = c.cache_per_layer == kAll ? store.shape().n_expert : c.cache_per_layer;
    so.cache_bytes = store.slot_bytes() * static_cast<uint64_t>(per * store.shape().n_moe_layers);
    if (c.prefetch) so.ahead_slots = static_cast<int>(file.metadata().get_uint(file.architecture() + ".expert_used_count"));
  }
  so.lanes = c.lanes;
  so.engine = c.engine;
  so.overlap = c.overlap;
  so.direct = c.direct;
  so.pack_rows16 = c.pack != Config::Pack::off;
  so.pack_at_fetch_end = -1;
  auto src = std::make_unique<StreamingExperts>(file, so);
  StreamingExperts* s = src.get();
  EXPECT_EQ(s->files().direct(), c.direct) << s->files().direct_note();
  if (c.dense != DensePolicy::mmap) {
    const DenseReport rep = load_dense(file, s->files(), c.dense);
    EXPECT_GT(rep.dense_bytes, 0u);
    EXPECT_GT(rep.loaded_bytes, 0u);
  }
  const auto m = model::load_model(file, model_options(), std::move(src));
  const auto& t = tokens_of(name);
  StreamRun r;
  r.result = model::evaluate(*m, t.tokens, t.n_prefill);
  r.counters = s->totals();
  r.cache_slots = s->cache_slots();
  r.packs = s->packs();
  r.prefetch_note = m->info().expert_prefetch;
  // As model::evaluate steps: the prefill in chunks of n_batch (any of them may hold one token), then one token a
  // pass.
  const int64_t n_batch = m->info().n_batch;
  r.one_token_passes = static_cast<int64_t>(t.tokens.size()) - t.n_prefill;
  for (int64_t s0 = 0; s0 < t.n_prefill; s0 += n_batch) r.one_token_passes += std::min(n_batch, t.n_prefill - s0) == 1;
  return r;
}

void expect_identical(const model::EvalResult& a, const model::EvalResult& b, const std::string& what) {
  ASSERT_EQ(a.logits.size(), b.logits.size()) << what;
  EXPECT_EQ(std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * sizeof(float)), 0)
      << what << ": logits differ from the resident run";
  EXPECT_EQ(a.routing, b.routing) << what << ": routing differs from the resident run";
}

// Counters that must hold for any run.
void expect_sane(const StreamRun& r, const Config& c, const std::string& what) {
  const StreamCounters& k = r.counters;
  EXPECT_GT(k.misses, 0u) << what;
  EXPECT_GE(k.bytes_read, k.misses) << what;
  EXPECT_GE(k.io_ms, 0.0) << what;
  if (c.cache_per_layer == 0) {
    EXPECT_EQ(k.hits, 0u) << what;
    EXPECT_EQ(r.cache_slots, 0) << what;
    EXPECT_GT(k.reread_bytes, 0u) << what;  // the decode tail reuses experts
  } else if (c.cache_per_layer == kAll) {
    EXPECT_EQ(k.evictions, 0u) << what;
    EXPECT_EQ(k.reread_bytes, 0u) << what;
    EXPECT_GT(k.hits, 0u) << what;
  } else {
    EXPECT_GT(k.evictions, 0u) << what;
  }
  // Packing happens only where asked, with a cache, on a model and CPU with rows16 kernels; each packed expert
  // landed in a cache slot first (a miss or a swap).
  if (c.pack == Config::Pack::off || r.cache_slots == 0) EXPECT_FALSE(r.packs) << what;
  if (!r.packs) EXPECT_EQ(k.packed, 0u) << what;
  EXPECT_LE(k.packed, k.misses + k.swaps) << what;
  if (r.packs && c.pack == Config::Pack::every_fetch) EXPECT_GT(k.packed, 0u) << what;
  if (!c.prefetch) {
    EXPECT_EQ(k.ahead_guesses + k.ahead_reads + k.ahead_bytes, 0u) << what;
    return;
  }
  // Every one-token pass guesses the experts of every MoE layer after the first, n_expert_used each, unless the
  // model says why it does not guess.
  if (r.prefetch_note.starts_with("next layer")) {
    const auto guessed_layers = static_cast<uint64_t>(r.result.n_moe_layers - 1);
    EXPECT_EQ(k.ahead_guesses, static_cast<uint64_t>(r.one_token_passes) * guessed_layers *
                                   static_cast<uint64_t>(r.result.n_expert_used))
        << what;
  } else {
    EXPECT_TRUE(r.prefetch_note.starts_with("off: ")) << what << ": " << r.prefetch_note;
    EXPECT_EQ(k.ahead_guesses, 0u) << what;
  }
  EXPECT_LE(k.ahead_right, k.ahead_guesses) << what;
  EXPECT_LE(k.ahead_reads, k.ahead_guesses) << what;
  EXPECT_LE(k.ahead_used, k.ahead_reads) << what;
  EXPECT_LE(k.ahead_bytes, k.bytes_read) << what;
  if (k.ahead_reads > 0) EXPECT_GT(k.ahead_bytes, 0u) << what;
}

// Every MoE model, a spread of configurations.
class StreamAllModels : public ::testing::TestWithParam<std::string> {};

TEST_P(StreamAllModels, BitIdenticalToResident) {
  const std::string name = GetParam();
  const auto& ref = resident_run(name);
  const Config configs[] = {
      {0, 1, io::EngineKind::pread_pool, true, true, DensePolicy::mmap},
      {1, 4, io::EngineKind::uring, false, true, DensePolicy::mmap},
      {2, 2, io::EngineKind::pread_pool, true, false, DensePolicy::anon},
      {kAll, 4, io::EngineKind::uring, true, true, DensePolicy::warm},
      {0, 2, io::EngineKind::uring, true, true, DensePolicy::mmap, true},
      {1, 4, io::EngineKind::pread_pool, false, true, DensePolicy::mmap, true},
      {2, 4, io::EngineKind::uring, true, false, DensePolicy::mmap, true},
      {1, 4, io::EngineKind::uring, true, true, DensePolicy::mmap, false, Config::Pack::every_fetch},
      {kAll, 2, io::EngineKind::pread_pool, false, true, DensePolicy::mmap, false, Config::Pack::every_fetch},
      {2, 4, io::EngineKind::uring, true, true, DensePolicy::mmap, true, Config::Pack::every_fetch},
  };
  for (const Config& c : configs) {
    const StreamRun r = streamed_run(test::model_path(name), name, c);
    expect_identical(r.result, ref, name + " " + c.name());
    expect_sane(r, c, name + " " + c.name());
  }
}

INSTANTIATE_TEST_SUITE_P(Oracle, StreamAllModels, ::testing::ValuesIn(test::moe_model_names()),
                         [](const auto& i) { return test::param_name(i.param); });

// The full option matrix on one model of each architecture family.
class StreamMatrix : public ::testing::TestWithParam<std::string> {};

TEST_P(StreamMatrix, EveryOptionCombinationIsBitIdentical) {
  const std::string name = GetParam();
  const auto& ref = resident_run(name);
  const bool full = name.starts_with("micro-");  // the tiny models get a corner of the matrix (time)
  for (const int64_t cache : {int64_t{0}, int64_t{1}, int64_t{2}, kAll}) {
    for (const int lanes : {1, 4}) {
      for (const auto engine : {io::EngineKind::pread_pool, io::EngineKind::uring}) {
        for (const bool overlap : {true, false}) {
          for (const bool direct : {true, false}) {
            if (!full && (cache == 2 || lanes == 1 || direct != overlap)) continue;
            const Config c{cache, lanes, engine, overlap, direct, DensePolicy::mmap};
            const StreamRun r = streamed_run(test::model_path(name), name, c);
            expect_identical(r.result, ref, name + " " + c.name());
          }
        }
      }
    }
  }
  for (const auto dense : {DensePolicy::warm, DensePolicy::anon}) {
    const Config c{1, 4, io::kDefaultEngine, true, true, dense};
    expect_identical(streamed_run(test::model_path(name), name, c).result, ref, name + " " + c.name());
  }
}

INSTANTIATE_TEST_SUITE_P(Families, StreamMatrix,
                         ::testing::Values("micro-qwen3moe-F16", "micro-gptoss-F16", "tiny-mixtral-Q4_0"),
                         [](const auto& i) { return test::param_name(i.param); });

// A copy of the model split into three shards streams from all three.
class StreamSplit : public ::testing::TestWithParam<std::string> {};

TEST_P(StreamSplit, ThreeShardsBitIdentical) {
  const std::string name = GetParam();
  const auto src = gguf::GgufModel::open(test::model_path(name));
  const auto paths = gguf::write_split(src, moetier::test::tmp_dir("stream_split_" + name), name, 3);
  for (const Config& c : {Config{1, 4, io::EngineKind::pread_pool, true, true, DensePolicy::anon},
                          Config{0, 2, io::EngineKind::uring, false, false, DensePolicy::mmap}}) {
    expect_identical(streamed_run(paths[0], name, c).result, resident_run(name), name + " split " + c.name());
  }
}

INSTANTIATE_TEST_SUITE_P(Families, StreamSplit,
                         ::testing::Values("tiny-qwen3moe-Q4_K_M", "tiny-gptoss-MXFP4", "tiny-mixtral-IQ4_XS"),
                         [](const auto& i) { return test::param_name(i.param); });

class StreamOracle : public ::testing::TestWithParam<std::string> {};

// A streamed model (4 lanes, overlap, direct I/O, the cache holding one expert per layer so experts are read and
// evicted all the time) held to the oracle protocol and tolerances, as the resident model is in tests/model.
TEST_P(StreamOracle, StreamedRunMeetsOracleTolerances) {
  const std::string name = GetParam();
  const auto file = gguf::GgufModel::open(test::model_path(name));
  StreamingOptions so;
  so.cache_bytes = ExpertStore(file).slot_bytes() * static_cast<uint64_t>(ExpertStore(file).shape().n_moe_layers);
  so.lanes = 4;
  so.overlap = true;
  so.direct = true;
  auto src = std::make_unique<StreamingExperts>(file, so);
  StreamingExperts* s = src.get();
  model::ModelOptions opts;
  opts.n_ctx = 512;
  const auto m = model::load_model(file, opts, std::move(src));
  const std::vector<moetier::test::OracleCase> cases = moetier::test::run_oracle_cases(*m, name);
  ASSERT_EQ(cases.size(), 3u) << name;
  moetier::test::expect_within_oracle_tolerance(moetier::test::oracle_totals(cases), file, name);
  EXPECT_GT(s->totals().misses, 0u) << name << ": the run must actually stream";
}

// One model per architecture family (streamed runs of every model are bit-identical to resident ones above,
// and the resident runs are checked against the oracle by tests/model): three of the top oracle folder, and the
// Q4_K_M file of each supported incoming architecture.
std::vector<std::string> stream_oracle_models() {
  std::vector<std::string> names{"micro-qwen3moe-F16", "tiny-gptoss-MXFP4", "tiny-mixtral-Q5_0"};
  for (const std::string& n : test::moe_model_names()) {
    if (n.ends_with("-Q4_K_M") && moetier::test::oracle_root_of(n) != moetier::test::oracle_dir()) names.push_back(n);
  }
  return names;
}
INSTANTIATE_TEST_SUITE_P(Oracle, StreamOracle, ::testing::ValuesIn(stream_oracle_models()),
                         [](const auto& i) { return test::param_name(i.param); });

}  // namespace
}  // namespace moetier::moe
