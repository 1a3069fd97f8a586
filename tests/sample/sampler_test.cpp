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

// Banned tokens (run --ignore-eos bans the end-of-generation ones) are never drawn, greedy or at a temperature
// with every filter open, even when a ban leaves one token; ids outside the vocabulary are errors.
TEST(Sampler, BannedTokensAreNeverDrawn) {
  SamplerParams p;
  p.temperature = 0.0f;
  const std::vector<float> l{0.1f, 2.0f, -1.0f, 1.9f, 0.0f};
  p.banned = {1};
  EXPECT_EQ(Sampler(p, 5).sample(l, {}), 3);
  p.banned = {1, 3, 0, 4};
  EXPECT_EQ(Sampler(p, 5).sample(l, {}), 2);
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.banned = {1, 3};
  Sampler s(p, 5);
  for (int i = 0; i < 200; ++i) {
    const int32_t t = s.sample(l, {});
    EXPECT_TRUE(t == 0 || t == 2 || t == 4) << t;
  }
  p.banned = {5};
  EXPECT_THROW(Sampler(p, 5), Error);
  p.banned = {-1};
  EXPECT_THROW(Sampler(p, 5), Error);
}

// OpenAI's logit_bias: added before anything else, so greedy sampling follows it too; +100 forces a token, -100
// bans one; ids and biases are checked.
TEST(Sampler, LogitBiasComesFirst) {
  SamplerParams p;
  p.temperature = 0.0f;
  const std::vector<float> l{0.1f, 2.0f, -1.0f, 1.9f, 0.0f};
  p.logit_bias = {{2, 100.0f}};
  EXPECT_EQ(Sampler(p, 5).sample(l, {}), 2);
  p.logit_bias = {{1, -100.0f}};
  EXPECT_EQ(Sampler(p, 5).sample(l, {}), 3);
  p.logit_bias = {{1, -0.2f}};
  EXPECT_EQ(Sampler(p, 5).sample(l, {}), 3);
  // At a temperature, a banned token is never drawn.
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.logit_bias = {{1, -100.0f}, {3, -100.0f}};
  Sampler s(p, 5);
  for (int i = 0; i < 200; ++i) {
    const int32_t t = s.sample(l, {});
    EXPECT_TRUE(t != 1 && t != 3) << t;
  }
  p.logit_bias = {{5, 1.0f}};
  EXPECT_THROW(Sampler(p, 5), Error);
  p.logit_bias = {{-1, 1.0f}};
  EXPECT_THROW(Sampler(p, 5), Error);
  p.logit_bias = {{0, 100.5f}};
  EXPECT_THROW(Sampler(p, 5), Error);
  p.logit_bias = {{0, std::numeric_limits<float>::quiet_NaN()}};
  EXPECT_THROW(Sampler(p, 5), Error);
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

// OpenAI's penalties as llama.cpp's penalties sampler applies them: logit -= frequency x count + presence x
// (count > 0), over the last repeat_last_n tokens, after the repeat penalty (the expectations follow that formula).
TEST(Sampler, FrequencyPenaltyScalesWithTheCount) {
  SamplerParams p;
  p.temperature = 0.0f;
  const std::vector<float> l{2.0f, 1.5f, 1.0f};
  const std::vector<int32_t> history{0, 0, 0};
  p.frequency_penalty = 0.2f;  // 2.0 - 3 x 0.2 = 1.4 < 1.5
  EXPECT_EQ(Sampler(p, 3).sample(l, history), 1);
  p.frequency_penalty = 0.1f;  // 2.0 - 3 x 0.1 = 1.7 > 1.5
  EXPECT_EQ(Sampler(p, 3).sample(l, history), 0);
  // Once in the window: 2.0 - 0.2 = 1.8 stays on top.
  p.frequency_penalty = 0.2f;
  EXPECT_EQ(Sampler(p, 3).sample(l, std::vector<int32_t>{0}), 0);
}

TEST(Sampler, PresencePenaltyCountsATokenOnce) {
  SamplerParams p;
  p.temperature = 0.0f;
  const std::vector<float> l{2.0f, 1.5f, 1.0f};
  p.presence_penalty = 0.4f;  // 2.0 - 0.4 = 1.6 > 1.5, however often 0 was seen
  EXPECT_EQ(Sampler(p, 3).sample(l, std::vector<int32_t>{0, 0, 0, 0, 0}), 0);
  p.presence_penalty = 0.6f;  // 2.0 - 0.6 = 1.4 < 1.5
  EXPECT_EQ(Sampler(p, 3).sample(l, std::vector<int32_t>{0}), 1);
  // A negative penalty favours what was seen: 1.0 + 1.5 = 2.5 > 2.0.
  p.presence_penalty = -1.5f;
  EXPECT_EQ(Sampler(p, 3).sample(l, std::vector<int32_t>{2}), 2);
}

TEST(Sampler, RepeatPenaltyComesBeforeTheAdditivePenalties) {
  SamplerParams p;
  p.temperature = 0.0f;
  p.repeat_penalty = 2.0f;
  p.presence_penalty = 0.6f;
  const std::vector<float> l{4.0f, 1.5f};
  // 4.0 / 2 - 0.6 = 1.4 < 1.5; the other order, (4.0 - 0.6) / 2 = 1.7, would keep token 0.
  EXPECT_EQ(Sampler(p, 2).sample(l, std::vector<int32_t>{0}), 1);
  // A negative logit is multiplied, then shifted: -1.0 x 2 - 0.6 = -2.6 < -2.5.
  const std::vector<float> neg{-1.0f, -2.5f};
  EXPECT_EQ(Sampler(p, 2).sample(neg, std::vector<int32_t>{0}), 1);
}

TEST(Sampler, PenaltiesLookOnlyAtTheWindow) {
  SamplerParams p;
  p.temperature = 0.0f;
  p.frequency_penalty = 1.0f;
  p.repeat_last_n = 2;
  const std::vector<float> l{2.0f, 1.5f, 0.0f};
  // Only the last two tokens (2, 2) count: token 0's three earlier occurrences are outside the window.
  Sampler s(p, 3);
  EXPECT_EQ(s.sample(l, std::vector<int32_t>{0, 0, 0, 2, 2}), 0);
  // The counts of one call do not carry into the next: here 0 is seen twice (2.0 - 2 = 0 < 1.5).
  EXPECT_EQ(s.sample(l, std::vector<int32_t>{0, 0}), 1);
  EXPECT_EQ(s.sample(l, std::vector<int32_t>{2, 2}), 0);
  // Ids outside the vocabulary in the history are ignored.
  EXPECT_EQ(s.sample(l, std::vector<int32_t>{7, -1}), 0);
  // repeat_last_n 0 turns every penalty off.
  p.repeat_last_n = 0;
  EXPECT_EQ(Sampler(p, 3).sample(l, std::vector<int32_t>{0, 0}), 0);
}

// With sampling on, the penalised logits are what the distribution is built from: frequency ln(4) x 1 on
// token 0 turns equal logits into probabilities 1/5 and 4/5 (5-sigma binomial bound).
TEST(Sampler, PenaltiesShapeTheDistribution) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.frequency_penalty = static_cast<float>(std::log(4.0));
  p.seed = 7;
  Sampler s(p, 2);
  const std::vector<float> l{0.0f, 0.0f};
  const std::vector<int32_t> history{0};
  const int n = 20000;
  int zeros = 0;
  for (int i = 0; i < n; ++i) zeros += s.sample(l, history) == 0 ? 1 : 0;
  const double sigma = std::sqrt(n * 0.2 * 0.8);
  EXPECT_NEAR(zeros, n * 0.2, 5 * sigma);
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
      {[](SamplerParams& p, float v) { p.presence_penalty = v; }, "presence_penalty"},
      {[](SamplerParams& p, float v) { p.frequency_penalty = v; }, "frequency_penalty"},
  };
  for (const auto& [set, name] : fields) {
    for (const float v : {nan, inf, -3.0f}) {
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
  for (const float v : {2.001f, -2.001f, -inf}) {
    p = SamplerParams{};
    p.presence_penalty = v;
    EXPECT_THROW(Sampler(p, 4), Error) << v;
    p = SamplerParams{};
    p.frequency_penalty = v;
    EXPECT_THROW(Sampler(p, 4), Error) << v;
  }
  for (const float v : {2.0f, -2.0f}) {
    p = SamplerParams{};
    p.presence_penalty = v;
    p.frequency_penalty = v;
    EXPECT_NO_THROW(Sampler(p, 4)) << v;
  }
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
