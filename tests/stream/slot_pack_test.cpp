// Repacking in the cache slots (StreamingOptions::pack_rows16): over a long random run of fetches, guesses read
// ahead, evictions and background swaps, every expert is delivered either as the file's bytes (gguf) or, once its
// slot has been repacked, as exactly the rows16 repack of them (the scalar specification, quant::repack_rows16) —
// never a slot repacked while a read still wrote into it, nor a stale layout after its slot was reused.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "moe/resident_experts.h"
#include "moe/streaming_experts.h"
#include "quant/repack.h"
#include "stream_test_util.h"

namespace moetier::moe {
namespace {

constexpr const char* kModel = "tiny-qwen3moe-Q4_K_M";  // Q4_K and Q6_K expert matrices, n_embd = n_ff = 256

// Checks each delivered expert against the resident source over the same file, in the layout the view says.
class Checker final : public ExpertConsumer {
 public:
  explicit Checker(const ResidentExperts& want) : want_(want) {}
  void start(int64_t layer) { layer_ = layer; }
  void on_experts(std::span<const int32_t> experts, std::span<const ExpertWeights> weights) override {
    for (size_t i = 0; i < experts.size(); ++i) {
      const ExpertWeights want = want_.expert(layer_, experts[i]);
      const std::string where = fmt::format("MoE layer {} expert {}", layer_, experts[i]);
      check(weights[i].gate, want.gate, where + " gate");
      check(weights[i].up, want.up, where + " up");
      check(weights[i].down, want.down, where + " down");
    }
  }
  uint64_t rows16 = 0, gguf = 0;  // matrices delivered in each layout

 private:
  void check(const quant::WeightView& got, const quant::WeightView& want, const std::string& where) {
    ASSERT_EQ(got.type, want.type) << where;
    ASSERT_EQ(got.rows, want.rows) << where;
    ASSERT_EQ(got.cols, want.cols) << where;
    const size_t n = static_cast<size_t>(want.rows) * want.row_bytes;
    if (got.layout == quant::WeightLayout::gguf) {
      ++gguf;
      EXPECT_EQ(std::memcmp(got.data, want.data, n), 0) << where << ": not the file's bytes";
      return;
    }
    ++rows16;
    std::vector<uint8_t>& spec = spec_[want.data];
    if (spec.empty()) {
      spec.resize(n);
      quant::repack_rows16(want.type, want.data, want.row_bytes, want.cols, 0, want.rows / quant::kRows16,
                           spec.data());
    }
    EXPECT_EQ(std::memcmp(got.data, spec.data(), n), 0) << where << ": not the rows16 repack of the file's bytes";
  }
  const ResidentExperts& want_;
  int64_t layer_ = 0;
  std::map<const uint8_t*, std::vector<uint8_t>> spec_;  // the specification's repack of each matrix, once
};

struct Case {
  int64_t cache;       // slots per layer
  const char* policy;  // lru or adaptive (background swaps)
  int ahead;           // ahead slots (reads ahead on guesses)
  int at_fetch_end;    // pack_at_fetch_end: steps of packing at each fetch's end (-1: until none waits; 1 step of
                       // 4 KiB: experts half packed across fetches, queued across evictions); 0: while reads are
                       // awaited
  bool skew;           // routing skewed to 6 experts per layer (hits to deliver repacked), else uniform (evictions,
                       // and swaps for the adaptive tier, whose counts then keep changing their mind)
};

TEST(SlotPack, RandomRunsDeliverTheFilesBytesOrTheirRepack) {
  const auto file = gguf::GgufModel::open(test::model_path(kModel));
  const ExpertStore store(file);
  const ResidentExperts resident(file, store.shape());
  const ExpertShape& sh = store.shape();
  for (const Case& k : {Case{2, "lru", 0, -1, true}, Case{5, "lru", 3, -1, true}, Case{6, "adaptive", 3, -1, false},
                        Case{16, "lru", 0, -1, true}, Case{5, "lru", 3, 1, true}, Case{8, "lru", 0, 2, false},
                        Case{6, "adaptive", 3, 1, false}, Case{6, "adaptive", 3, 0, false},
                        Case{5, "lru", 0, 0, true}}) {
    SCOPED_TRACE(fmt::format("cache {} a layer, policy {}, {} ahead slots, packing at each fetch's end: {}",
                             k.cache, k.policy, k.ahead, k.at_fetch_end));
    StreamingOptions so;
    so.cache_bytes = store.slot_bytes() * static_cast<uint64_t>(k.cache * sh.n_moe_layers);
    so.ahead_slots = k.ahead;
    so.policy = k.policy;
    so.policy_params.adapt_every = 2;
    so.pack_rows16 = true;
    so.pack_at_fetch_end = k.at_fetch_end;
    so.pack_step_bytes = k.at_fetch_end > 0 ? 4096 : so.pack_step_bytes;  // a tiny expert's matrix in several steps
    StreamingExperts s(file, so);
    EXPECT_EQ(s.packs(), store.packing_slices() > 0);
    const bool adaptive = std::string(k.policy) == "adaptive";
    Checker c(resident);
    std::mt19937 rng(static_cast<uint32_t>(11 + k.cache));
    std::vector<int32_t> ids(static_cast<size_t>(sh.n_expert));
    for (int32_t e = 0; e < sh.n_expert; ++e) ids[static_cast<size_t>(e)] = e;
    auto pick = [&](size_t n) {
      std::shuffle(ids.begin(), ids.end(), rng);
      return std::vector<int32_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
    };
    for (int token = 0; token < 40; ++token) {
      // The engine packs only in prefill; the hook at every fetch's end.
      s.set_phase(k.at_fetch_end == 0 && token % 2 == 0 ? Phase::prefill : Phase::decode);
      for (int64_t l = 0; l < sh.n_moe_layers; ++l) {
        std::vector<int32_t> want = pick(4);
        for (int32_t& e : want) {
          if (k.skew && rng() % 3 != 0) e = static_cast<int32_t>(rng() % 6);
        }
        std::sort(want.begin(), want.end());
        want.erase(std::unique(want.begin(), want.end()), want.end());
        if (k.ahead > 0 && rng() % 2 == 0) s.prefetch(l, pick(3));
        c.start(l);
        s.fetch(l, want, c);
      }
      s.end_step();
    }
    const StreamCounters t = s.totals();
    EXPECT_GT(t.hits, 0u);
    EXPECT_LE(t.packed, t.misses + t.swaps);
    if (adaptive) EXPECT_GT(t.swaps, 0u);
    if (!s.packs()) {
      EXPECT_EQ(t.packed + c.rows16, 0u);
    } else if (k.at_fetch_end != 0) {
      EXPECT_GT(t.packed, 0u);
      EXPECT_GT(c.rows16, 0u);
    }
    EXPECT_GT(c.gguf + c.rows16, 0u);
  }
}

// The engine's own timing: a prompt in chunks of 3 tokens, so that later chunks hit experts that earlier ones left
// in the cache and pack them while their reads are awaited, then decode; the logits and routing are the resident
// run's (same chunks), bit for bit, whatever got packed when (the count depends on the reads' timing).
TEST(SlotPack, PackingInPrefillsReadWaitsIsBitIdentical) {
  const model::TokenInput t = test::oracle_tokens(kModel, "p1", 6);
  ASSERT_GT(t.n_prefill, 6);
  const model::ModelOptions mo{.n_ctx = 128, .n_batch = 3};
  const auto file = gguf::GgufModel::open(test::model_path(kModel));
  const model::EvalResult resident = model::evaluate(*model::load_model(file, mo), t.tokens, t.n_prefill);
  for (const char* policy : {"lru", "adaptive"}) {
    StreamingOptions so;
    so.cache_bytes = ExpertStore(file).slot_bytes() * 24;
    so.policy = policy;
    so.pack_rows16 = true;
    auto src = std::make_unique<StreamingExperts>(file, so);
    StreamingExperts* s = src.get();
    const auto m = model::load_model(file, mo, std::move(src));
    const model::EvalResult got = model::evaluate(*m, t.tokens, t.n_prefill);
    ASSERT_EQ(got.logits.size(), resident.logits.size()) << policy;
    EXPECT_EQ(std::memcmp(got.logits.data(), resident.logits.data(), resident.logits.size() * sizeof(float)), 0)
        << policy;
    EXPECT_EQ(got.routing, resident.routing) << policy;
    EXPECT_GT(s->totals().hits, 0u) << policy;
    EXPECT_LE(s->totals().packed, s->totals().hits) << policy;  // only experts hit again are packed
    RecordProperty(std::string("packed_") + policy, static_cast<int>(s->totals().packed));
  }
}

// Without pack_rows16, or without a cache, nothing is repacked.
TEST(SlotPack, OnlyWhereAskedAndCached) {
  const auto file = gguf::GgufModel::open(test::model_path(kModel));
  const ExpertStore store(file);
  StreamingOptions so;
  so.cache_bytes = store.slot_bytes() * 8;
  EXPECT_FALSE(StreamingExperts(file, so).packs());
  so.pack_rows16 = true;
  EXPECT_EQ(StreamingExperts(file, so).packs(), store.packing_slices() > 0);
  const bool says = StreamingExperts(file, so).describe().find("repacked in their slots") != std::string::npos;
  EXPECT_EQ(says, store.packing_slices() > 0);
  so.cache_bytes = 0;
  EXPECT_FALSE(StreamingExperts(file, so).packs());
}

}  // namespace
}  // namespace moetier::moe
