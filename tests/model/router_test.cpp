// model::route's choice against its definition (router.h): the k largest values (the softmax probabilities, or the
// logits for topk_softmax), in descending order, the lower expert index first among equals. Inputs drawn from a
// few levels, so that ties are common.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "model/router.h"

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

}  // namespace
}  // namespace moetier::model
