// Sampling: greedy is argmax, filters keep what they should, a seed fixes the draws.
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "sample/greedy.h"
#include "sample/sampler.h"
#include "util/error.h"

namespace moetier::sample {
namespace {

std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

TEST(Sampler, ZeroTemperatureIsArgmax) {
  SamplerParams p;
  p.temperature = 0.0f;
  Sampler s(p, 5);
  const std::vector<float> l{0.1f, 2.0f, -1.0f, 1.9f, 0.0f};
  EXPECT_EQ(s.sample(l, {}), 1);
  EXPECT_EQ(argmax(l), 1);
}

TEST(Sampler, TopKOneIsArgmaxAtAnyTemperature) {
  SamplerParams p;
  p.temperature = 5.0f;
  p.top_k = 1;
  Sampler s(p, 4);
  const std::vector<float> l{0.1f, 0.2f, 3.0f, 0.3f};
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(l, {}), 2);
}

// Draw frequencies follow the filtered, renormalised distribution (a binomial bound of 5 sigma per token).
TEST(Sampler, DrawsFollowTheFilteredDistribution) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 0.85f;  // keeps 0.5, 0.3, 0.1 (cumulative 0.9 >= 0.85); drops the 0.06 and 0.04 tail
  p.min_p = 0.0f;
  p.seed = 123;
  Sampler s(p, 5);
  const auto l = logits_of({0.5, 0.3, 0.1, 0.06, 0.04});
  std::map<int32_t, int> count;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++count[s.sample(l, {})];
  EXPECT_EQ(count[3] + count[4], 0);
  const double expect[3] = {0.5 / 0.9, 0.3 / 0.9, 0.1 / 0.9};
  for (int t = 0; t < 3; ++t) {
    const double sigma = std::sqrt(n * expect[t] * (1 - expect[t]));
    EXPECT_NEAR(count[t], n * expect[t], 5 * sigma) << t;
  }
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.5f;  // keeps tokens with p >= 0.5 * 0.6 = 0.3
  Sampler s(p, 3);
  const auto l = logits_of({0.6, 0.3, 0.1});
  for (int i = 0; i < 200; ++i) EXPECT_NE(s.sample(l, {}), 2);
}

TEST(Sampler, RepeatPenaltyMovesAwayFromRecentTokens) {
  SamplerParams p;
  p.temperature = 0.0f;
  p.repeat_penalty = 2.0f;
  Sampler s(p, 3);
  const std::vector<float> l{2.0f, 1.5f, 0.5f};
  const std::vector<int32_t> history{0, 0, 0};  // penalised once: 2.0 / 2 = 1.0 < 1.5
  EXPECT_EQ(s.sample(l, history), 1);
}

TEST(Sampler, SameSeedSameDraws) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.seed = 99;
  Sampler a(p, 6), b(p, 6);
  const auto l = logits_of({0.2, 0.2, 0.2, 0.2, 0.1, 0.1});
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.sample(l, {}), b.sample(l, {}));
}

// Settings outside their ranges (NaN and infinity included, which pass a plain `< 0` check) are refused with the
// setting's name, whoever fills SamplerParams; before, NaN temperature sampled garbage.
TEST(Sampler, RejectsSettingsOutsideTheirRanges) {
  const float nan = std::nanf("");
  const float inf = std::numeric_limits<float>::infinity();
  const std::pair<void (*)(SamplerParams&, float), const char*> fields[] = {
      {[](SamplerParams& p, float v) { p.temperature = v; }, "temperature"},
      {[](SamplerParams& p, float v) { p.top_p = v; }, "top_p"},
      {[](SamplerParams& p, float v) { p.min_p = v; }, "min_p"},
      {[](SamplerParams& p, float v) { p.repeat_penalty = v; }, "repeat_penalty"},
  };
  for (const auto& [set, name] : fields) {
    for (const float v : {nan, inf, -1.0f}) {
      SamplerParams p;
      set(p, v);
      try {
        Sampler s(p, 4);
        ADD_FAILURE() << name << " = " << v << " was accepted";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
      }
    }
  }
  SamplerParams p;
  p.top_k = -3;
  EXPECT_THROW(Sampler(p, 4), Error);
  p = SamplerParams{};
  p.repeat_last_n = -1;
  EXPECT_THROW(Sampler(p, 4), Error);
  EXPECT_THROW(Sampler(SamplerParams{}, 0), Error);
  // The ends of the ranges are accepted: greedy, top-p 1, min-p 0.
  p = SamplerParams{};
  p.temperature = 0.0f;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.top_k = 0;
  p.repeat_last_n = 0;
  EXPECT_NO_THROW(Sampler(p, 4));
}

}  // namespace
}  // namespace moetier::sample
