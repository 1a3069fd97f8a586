// model::route's choice against its definition (router.h): the k largest values (the softmax probabilities, or the
// logits for topk_softmax), in descending order, the lower expert index first among equals. Inputs drawn from a
// few levels, so that ties are common.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "model/moe_ffn.h"
#include "model/router.h"
#include "util/thread_pool.h"

namespace moetier::model {
namespace {

// The definition: indices sorted by value, descending, stable (so equal values keep ascending index); the first k.
std::vector<int32_t> expected_ids(const std::vector<float>& v, int64_t k) {
  std::vector<int32_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int32_t a, int32_t b) { return v[static_cast<size_t>(a)] > v[static_cast<size_t>(b)]; });
  idx.resize(static_cast<size_t>(k));
  return idx;
}

TEST(Router, ChoosesTheKLargestLowerIndexFirstAmongEquals) {
  std::mt19937 rng(3);
  for (const auto gating : {RouterConfig::Gating::softmax_topk, RouterConfig::Gating::topk_softmax}) {
    for (const auto [n, k] : {std::pair<int64_t, int64_t>{8, 2}, {32, 4}, {128, 8}, {256, 8}, {64, 16}}) {
      const RouterConfig cfg{gating, true, n, k};
      std::uniform_int_distribution<int> level(0, 5);  // six values: many ties, often among the k largest
      for (int trial = 0; trial < 200; ++trial) {
        std::vector<float> logits(static_cast<size_t>(n));
        for (auto& l : logits) l = 0.75f * static_cast<float>(level(rng));
        std::vector<float> probs(static_cast<size_t>(n)), weights(static_cast<size_t>(k));
        std::vector<int32_t> ids(static_cast<size_t>(k));
        route(cfg, logits.data(), probs.data(), ids.data(), weights.data());
        // softmax_topk ranks the probabilities it computed, topk_softmax the logits.
        const std::vector<float>& ranked = gating == RouterConfig::Gating::softmax_topk ? probs : logits;
        EXPECT_EQ(ids, expected_ids(ranked, k)) << "n " << n << " k " << k << " trial " << trial;
        for (size_t s = 1; s < weights.size(); ++s) EXPECT_GE(weights[s - 1], weights[s]);
      }
    }
  }
}

// A batch routed across a pool (MoeFfn::route_batch, at least kParallelRouteTokens tokens) gives the bits of the
// same batch routed on one thread: choices, weights, the grouping by expert; with and without a router bias.
TEST(Router, ABatchRoutedAcrossAPoolGivesTheSameBits) {
  constexpr int64_t kTok = 77, kExperts = 64, kUsed = 6;
  static_assert(kTok >= MoeFfn::kParallelRouteTokens);
  const RouterConfig cfg{RouterConfig::Gating::softmax_topk, true, kExperts, kUsed};
  std::mt19937 rng(9);
  std::normal_distribution<float> d;
  std::vector<float> logits(static_cast<size_t>(kTok * kExperts));
  for (auto& l : logits) l = d(rng);
  for (const bool bias : {false, true}) {
    RouterWeights rw;
    if (bias) {
      for (int64_t e = 0; e < kExperts; ++e) rw.bias.push_back(0.1f * d(rng));
    }
    MoeFfn serial(cfg, GluConfig{}, 8, 8, kTok), pooled(cfg, GluConfig{}, 8, 8, kTok);
    util::ThreadPool pool(3);
    std::vector<float> l1 = logits, l2 = logits;  // the bias is added in place
    std::vector<int32_t> r1(static_cast<size_t>(kTok * kUsed)), r2(r1.size());
    serial.route_batch(0, rw, l1.data(), kTok, r1.data());
    pooled.route_batch(0, rw, l2.data(), kTok, r2.data(), &pool);
    EXPECT_EQ(r1, r2) << "bias " << bias;
    EXPECT_EQ(0, std::memcmp(l1.data(), l2.data(), l1.size() * sizeof(float)));
    for (int64_t ts = 0; ts < kTok * kUsed; ++ts) {
      EXPECT_EQ(std::bit_cast<uint32_t>(serial.weight(ts)), std::bit_cast<uint32_t>(pooled.weight(ts))) << ts;
      EXPECT_EQ(serial.position(ts), pooled.position(ts)) << ts;
    }
    ASSERT_EQ(serial.chosen().size(), pooled.chosen().size());
    for (size_t i = 0; i < serial.chosen().size(); ++i) {
      const int32_t e = serial.chosen()[i];
      EXPECT_EQ(e, pooled.chosen()[i]);
      EXPECT_EQ(serial.start(e), pooled.start(e));
      EXPECT_EQ(serial.count(e), pooled.count(e));
    }
  }
}

}  // namespace
}  // namespace moetier::model
