// The recurrent state of qwen35moe's DeltaNet blocks as sequence state (model/recurrent_state.h): each sequence
// has its own, a sequence restarting at position 0 starts from zero, a position the state has not reached (or has
// passed) is refused, and Generator::rewind to a prefix the state cannot keep runs the kept tokens again, so what
// follows is exactly what a fresh context computes.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "gguf/gguf.h"
#include "model/generator.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "test_support.h"
#include "util/error.h"

namespace moetier::model {
namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

gguf::GgufModel open_tiny() { return gguf::GgufModel::open(test::oracle_model("tiny-qwen35moe-Q8_0")); }

TEST(Qwen35State, SequencesKeepTheirOwnState) {
  const auto f = open_tiny();
  const auto two = load_model(f, ModelOptions{.n_ctx = 64, .n_batch = 16, .n_seq = 2});
  const auto one = load_model(f, ModelOptions{.n_ctx = 64, .n_batch = 16});
  const int64_t V = one->info().n_vocab;
  const std::vector<int32_t> a = {1, 5, 9, 13, 17, 21};
  const std::vector<int32_t> b = {2, 4, 6, 8, 10, 12, 14, 16, 18, 20};
  const int32_t ta = 7, tb = 3;
  std::vector<float> a1(static_cast<size_t>(V)), a2(a1), b1(a1), b2(a1), x1(a1), x2(a1), y1(a1), y2(a1);
  one->forward(a, 0, a1, LogitsMode::last);
  one->forward({&ta, 1}, static_cast<int64_t>(a.size()), a2, LogitsMode::last);
  one->forward(b, 0, b1, LogitsMode::last);  // restarting at 0 forgets a
  one->forward({&tb, 1}, static_cast<int64_t>(b.size()), b2, LogitsMode::last);

  two->set_sequence(0);
  two->forward(a, 0, x1, LogitsMode::last);
  two->set_sequence(1);
  two->forward(b, 0, y1, LogitsMode::last);
  two->set_sequence(0);
  two->forward({&ta, 1}, static_cast<int64_t>(a.size()), x2, LogitsMode::last);
  two->set_sequence(1);
  two->forward({&tb, 1}, static_cast<int64_t>(b.size()), y2, LogitsMode::last);
  EXPECT_TRUE(same_bits(x1, a1));
  EXPECT_TRUE(same_bits(x2, a2));  // a's state was not touched by b's prompt
  EXPECT_TRUE(same_bits(y1, b1));  // and b's (and one's restart) started from zero
  EXPECT_TRUE(same_bits(y2, b2));
}

TEST(Qwen35State, RefusesPositionsTheStateIsNotAt) {
  const auto f = open_tiny();
  const auto m = load_model(f, ModelOptions{.n_ctx = 64, .n_batch = 16});
  std::vector<float> l(static_cast<size_t>(m->info().n_vocab));
  const std::vector<int32_t> p = {1, 5, 9, 13};
  m->forward(p, 0, l, LogitsMode::last);
  const int32_t t = 7;
  EXPECT_THROW(m->forward({&t, 1}, 2, l, LogitsMode::last), Error);  // a rewind it cannot do
  EXPECT_THROW(m->forward({&t, 1}, 5, l, LogitsMode::last), Error);  // a gap
  EXPECT_NO_THROW(m->forward({&t, 1}, 4, l, LogitsMode::last));
  EXPECT_TRUE(m->can_keep(5, 5));
  EXPECT_TRUE(m->can_keep(0, 5));
  EXPECT_FALSE(m->can_keep(3, 5));
}

TEST(Qwen35State, RewindRunsTheKeptTokensAgain) {
  const auto f = open_tiny();
  const auto m = load_model(f, ModelOptions{.n_ctx = 64, .n_batch = 4});
  sample::SamplerParams sp;
  sp.temperature = 0.0f;
  sample::Sampler sampler(sp, m->info().n_vocab);
  const std::vector<int32_t> kept = {1, 5, 9, 13, 17, 21, 25};
  const std::vector<int32_t> dropped = {30, 31, 32, 33, 34};

  Generator fresh(*m, sampler);
  fresh.prefill(kept);
  fresh.decode(40);
  const int32_t want = fresh.sample();

  Generator g(*m, sampler);
  g.prefill(kept);
  g.prefill(dropped);
  g.rewind(static_cast<int64_t>(kept.size()));
  EXPECT_EQ(g.n_past(), static_cast<int64_t>(kept.size()));
  EXPECT_EQ(g.prefill_tokens, static_cast<int64_t>(2 * kept.size() + dropped.size()));  // the rerun counts
  g.decode(40);
  EXPECT_EQ(g.sample(), want);

  // The same, logits bit for bit, against a model that ran only the kept tokens.
  const auto ref = load_model(f, ModelOptions{.n_ctx = 64, .n_batch = 4});
  const auto b = load_model(f, ModelOptions{.n_ctx = 64, .n_batch = 4});
  const int64_t V = m->info().n_vocab;
  std::vector<float> lr(static_cast<size_t>(V)), lb(lr);
  for (size_t i = 0; i < kept.size(); i += 4) {
    const size_t len = std::min<size_t>(4, kept.size() - i);
    ref->forward(std::span(kept).subspan(i, len), static_cast<int64_t>(i), lr, LogitsMode::last);
  }
  const int32_t next = 40;
  ref->forward({&next, 1}, static_cast<int64_t>(kept.size()), lr, LogitsMode::last);
  sample::Sampler s2(sp, V);
  Generator gb(*b, s2);
  gb.prefill(kept);
  gb.prefill(dropped);
  gb.rewind(static_cast<int64_t>(kept.size()));
  b->forward({&next, 1}, static_cast<int64_t>(kept.size()), lb, LogitsMode::last);
  EXPECT_TRUE(same_bits(lb, lr));
}

}  // namespace
}  // namespace moetier::model
