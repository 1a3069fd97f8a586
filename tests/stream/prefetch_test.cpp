// The next-layer prefetch's mechanics in the streaming store (moe/streaming_experts.h): a fetch takes over the reads
// ahead it asks for (landed or in flight) and delivers the file's bytes, an expert the cache keeps stays in the slot
// it was read ahead into, held experts are not read ahead, a guess the fetch does not ask for is dropped, and a long
// random run of guesses and fetches over every layer delivers the resident source's bytes every time.
#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "moe/resident_experts.h"
#include "moe/streaming_experts.h"
#include "stream_test_util.h"

namespace moetier::moe {
namespace {

// Checks every delivered expert of the current fetch against the resident source over the same file.
class Checker final : public ExpertConsumer {
 public:
  explicit Checker(const ResidentExperts& want) : want_(want) {}
  void start(int64_t layer) {
    layer_ = layer;
    delivered_.assign(static_cast<size_t>(want_.shape().n_expert), 0);
  }
  void on_experts(std::span<const int32_t> experts, std::span<const ExpertWeights> weights) override {
    for (size_t i = 0; i < experts.size(); ++i) {
      ++delivered_[static_cast<size_t>(experts[i])];
      EXPECT_TRUE(test::same_expert(weights[i], want_.expert(layer_, experts[i]), want_.shape()))
          << "MoE layer " << layer_ << " expert " << experts[i] << " differs from the resident source";
    }
  }
  int delivered(int32_t e) const { return delivered_[static_cast<size_t>(e)]; }

 private:
  const ResidentExperts& want_;
  int64_t layer_ = 0;
  std::vector<int> delivered_;  // [n_expert]
};

struct Fixture {
  explicit Fixture(const std::string& name, int64_t cache_per_layer, int ahead, int lanes = 4,
                   const std::string& policy = "lru")
      : file(gguf::GgufModel::open(test::model_path(name))), store(file), resident(file, store.shape()) {
    StreamingOptions so;
    so.cache_bytes = store.slot_bytes() * static_cast<uint64_t>(cache_per_layer * store.shape().n_moe_layers);
    so.ahead_slots = ahead;
    so.lanes = lanes;
    so.policy = policy;
    so.policy_params.adapt_every = 2;  // swap passes often enough to overlap the guesses
    stream = std::make_unique<StreamingExperts>(file, so);
  }
  void fetch(int64_t layer, std::vector<int32_t> experts, Checker& c) {
    c.start(layer);
    stream->fetch(layer, experts, c);
    for (int32_t e : experts) EXPECT_EQ(c.delivered(e), 1) << "layer " << layer << " expert " << e;
  }
  gguf::GgufModel file;
  ExpertStore store;
  ResidentExperts resident;
  std::unique_ptr<StreamingExperts> stream;
};

TEST(Prefetch, AFetchTakesOverTheReadsAheadItAsksForAndTheCacheKeepsThem) {
  Fixture f("micro-qwen3moe-F16", 2, 2);
  ASSERT_TRUE(f.stream->reads_ahead());
  Checker c(f.resident);
  f.stream->set_phase(Phase::decode);
  f.stream->prefetch(1, std::vector<int32_t>{3, 5});
  StreamCounters t = f.stream->totals();
  EXPECT_EQ(t.ahead_guesses, 2u);
  EXPECT_EQ(t.ahead_reads, 2u);
  f.fetch(1, {3, 7}, c);  // 3 read ahead (landed or not), 7 not guessed, 5 guessed wrong
  t = f.stream->totals();
  EXPECT_EQ(t.misses, 2u);  // a guess is still a miss: the hit rate is the cache's
  EXPECT_EQ(t.hits, 0u);
  EXPECT_EQ(t.ahead_right, 1u);
  EXPECT_EQ(t.ahead_used, 1u);
  EXPECT_GE(t.ahead_bytes, f.store.expert_bytes(1));
  EXPECT_GE(t.bytes_read, t.ahead_bytes);
  // Both misses stay in the cache (two slots a layer); the one read ahead from the slot it was read into.
  f.fetch(1, {3, 7}, c);
  t = f.stream->totals();
  EXPECT_EQ(t.hits, 2u);
  EXPECT_EQ(t.misses, 2u);
  // A held expert is not read ahead.
  f.stream->prefetch(1, std::vector<int32_t>{3, 7});
  EXPECT_EQ(f.stream->totals().ahead_reads, 2u);
  // A guess of another layer replaces the last one: layer 1's fetch finds no guess of its own (ahead_right counts
  // a live guess whether or not its read started).
  f.stream->prefetch(1, std::vector<int32_t>{0, 1});
  f.stream->prefetch(0, std::vector<int32_t>{1, 2});
  f.fetch(1, {0, 1}, c);
  t = f.stream->totals();
  EXPECT_EQ(t.ahead_used, 1u);
  EXPECT_EQ(t.ahead_right, 1u);
  // end_step() drops every guess.
  f.stream->prefetch(0, std::vector<int32_t>{4, 5});
  f.stream->end_step();
  f.fetch(0, {4, 5}, c);
  t = f.stream->totals();
  EXPECT_EQ(t.ahead_used, 1u);
  EXPECT_EQ(t.ahead_right, 1u);
}

// Reads ahead start on idle lanes only: with one lane, one slice of the first guess goes out; the fetch takes that
// read over (its other slices become the fetch's own reads) and reads the guess that never started as a plain miss.
TEST(Prefetch, AGuessWaitsForAnIdleLane) {
  Fixture f("micro-qwen3moe-F16", 0, 2, 1);
  ASSERT_GT(f.store.n_slices(1), 1);
  Checker c(f.resident);
  f.stream->prefetch(1, std::vector<int32_t>{3, 5});
  StreamCounters t = f.stream->totals();
  EXPECT_EQ(t.ahead_guesses, 2u);
  EXPECT_EQ(t.ahead_reads, 1u);
  f.fetch(1, {3, 5}, c);
  t = f.stream->totals();
  EXPECT_EQ(t.ahead_right, 2u);
  EXPECT_EQ(t.ahead_used, 1u);
  EXPECT_EQ(t.misses, 2u);
  EXPECT_GE(t.bytes_read, 2 * f.store.expert_bytes(1));
}

TEST(Prefetch, NoCacheDeliversTheReadsAheadOnce) {
  Fixture f("micro-gptoss-F16", 0, 4, 4 * ExpertStore::kMaxSlices);  // lanes for every guess's slices
  Checker c(f.resident);
  f.stream->prefetch(1, std::vector<int32_t>{0, 1, 2, 3});
  f.fetch(1, {1, 2, 6}, c);
  const StreamCounters t = f.stream->totals();
  EXPECT_EQ(t.ahead_used, 2u);
  EXPECT_EQ(t.ahead_right, 2u);
  EXPECT_EQ(t.misses, 3u);
  EXPECT_EQ(t.ahead_reads, 4u);
  // The slots of the reads taken over are free again once delivered (the wrong guesses' may still be reading):
  // the next guess of two reads both.
  f.stream->prefetch(1, std::vector<int32_t>{1, 2});
  EXPECT_EQ(f.stream->totals().ahead_reads, 6u);
  f.fetch(1, {1, 2}, c);
  EXPECT_EQ(f.stream->totals().ahead_used, 4u);
}

// Random guesses (right, wrong, partly held) before random fetches over every layer, with evictions (and, with
// the adaptive policy, background swaps between the tokens): every delivery is the resident source's bytes, and
// the counters stay consistent.
TEST(Prefetch, RandomGuessesNeverChangeWhatIsDelivered) {
  struct Case {
    int64_t cache;
    const char* policy;
  };
  for (const Case& k : {Case{0, "lru"}, Case{1, "lru"}, Case{3, "lru"}, Case{2, "adaptive"}, Case{3, "adaptive"}}) {
    const int64_t cache = k.cache;
    SCOPED_TRACE(fmt::format("cache {} a layer, policy {}", cache, k.policy));
    Fixture f("micro-qwen3moe-F16", cache, 3, 4, k.policy);
    const ExpertShape& sh = f.store.shape();
    Checker c(f.resident);
    std::mt19937 rng(static_cast<uint32_t>(7 + cache));
    std::vector<int32_t> ids(static_cast<size_t>(sh.n_expert));
    for (int32_t e = 0; e < sh.n_expert; ++e) ids[static_cast<size_t>(e)] = e;
    auto pick = [&](size_t n) {
      std::shuffle(ids.begin(), ids.end(), rng);
      return std::vector<int32_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
    };
    f.stream->set_phase(Phase::decode);
    for (int token = 0; token < 40; ++token) {
      for (int64_t l = 0; l < sh.n_moe_layers; ++l) {
        std::vector<int32_t> want = pick(3);
        if (rng() % 4 != 0) {  // a guess most of the time, sharing some experts with the fetch
          std::vector<int32_t> guess = pick(3);
          guess[0] = want[rng() % 3];
          guess.erase(std::remove(guess.begin() + 1, guess.end(), guess[0]), guess.end());
          f.stream->prefetch(l, guess);
        }
        f.fetch(l, want, c);
      }
      f.stream->end_step();
    }
    const StreamCounters t = f.stream->totals();
    EXPECT_GT(t.ahead_reads, 0u) << "cache " << cache;
    EXPECT_GT(t.ahead_used, 0u) << "cache " << cache;
    EXPECT_LE(t.ahead_used, t.ahead_reads);
    EXPECT_LE(t.ahead_right, t.ahead_guesses);
    EXPECT_LE(f.stream->resident_bytes(), static_cast<uint64_t>(f.stream->cache_slots()) * f.store.slot_bytes());
    if (std::string(k.policy) == "adaptive") EXPECT_GT(t.swap_bytes, 0u);
  }
}

}  // namespace
}  // namespace moetier::moe
