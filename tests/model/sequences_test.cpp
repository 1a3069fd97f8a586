// Several sequences in one model (ModelOptions::n_seq, `serve --parallel`): each has its own KV cache, so
// sequences that take turns compute exactly what each computes alone, bit for bit.
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

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

TEST(Sequences, InterleavedSequencesMatchEachAlone) {
  const auto f = gguf::GgufModel::open(test::oracle_dir() / "models/tiny-qwen3moe-Q4_K_M.gguf");
  const auto two = load_model(f, ModelOptions{.n_ctx = 64, .n_batch = 16, .n_seq = 2});
  const auto one = load_model(f, ModelOptions{.n_ctx = 64, .n_batch = 16});
  ASSERT_EQ(two->info().n_seq, 2);
  const int64_t V = two->info().n_vocab;
  const std::vector<int32_t> a = {1, 5, 9, 13, 17, 21};
  const std::vector<int32_t> b = {2, 4, 6, 8, 10, 12, 14, 16, 18, 20};

  // Alone, on the one-sequence model: each prompt, then one more token.
  const auto alone = [&](const std::vector<int32_t>& p, int32_t next) {
    std::vector<float> l1(static_cast<size_t>(V)), l2(static_cast<size_t>(V));
    one->forward(p, 0, l1, LogitsMode::last);
    one->forward({&next, 1}, static_cast<int64_t>(p.size()), l2, LogitsMode::last);
    return std::pair{l1, l2};
  };
  const auto [a1, a2] = alone(a, 7);
  const auto [b1, b2] = alone(b, 3);

  // Interleaved on the two-sequence model: a's prompt, b's prompt, a's token, b's token.
  std::vector<float> x1(static_cast<size_t>(V)), y1(x1), x2(x1), y2(x1);
  two->set_sequence(0);
  two->forward(a, 0, x1, LogitsMode::last);
  two->set_sequence(1);
  two->forward(b, 0, y1, LogitsMode::last);
  const int32_t ta = 7, tb = 3;
  two->set_sequence(0);
  two->forward({&ta, 1}, static_cast<int64_t>(a.size()), x2, LogitsMode::last);
  two->set_sequence(1);
  two->forward({&tb, 1}, static_cast<int64_t>(b.size()), y2, LogitsMode::last);
  EXPECT_TRUE(same_bits(x1, a1));
  EXPECT_TRUE(same_bits(y1, b1));
  EXPECT_TRUE(same_bits(x2, a2));  // a's KV rows were not touched by b's prompt
  EXPECT_TRUE(same_bits(y2, b2));

  EXPECT_THROW(two->set_sequence(2), Error);
  EXPECT_THROW(two->set_sequence(-1), Error);
  EXPECT_THROW(one->set_sequence(1), Error);
  EXPECT_THROW(load_model(f, ModelOptions{.n_ctx = 64, .n_seq = 0}), Error);
  EXPECT_THROW(load_model(f, ModelOptions{.n_ctx = 64, .n_seq = kMaxSequences + 1}), Error);
}

// Two generators on one model, each on its own sequence, taking turns token by token: the same greedy text as
// each alone.
TEST(Sequences, GeneratorsTakingTurnsGenerateWhatEachDoesAlone) {
  const auto f = gguf::GgufModel::open(test::oracle_dir() / "models/tiny-qwen3moe-Q4_K_M.gguf");
  sample::SamplerParams greedy;
  greedy.temperature = 0.0f;
  const std::vector<std::vector<int32_t>> prompts = {{1, 5, 9, 13}, {2, 4, 6, 8, 10, 12, 14}};
  const auto run = [&](Generator& g, std::vector<int32_t>& out, int n) {
    for (int i = 0; i < n; ++i) {
      const int32_t t = g.sample();
      out.push_back(t);
      g.decode(t);
    }
  };
  std::vector<std::vector<int32_t>> alone(2);
  for (size_t i = 0; i < 2; ++i) {
    const auto m = load_model(f, ModelOptions{.n_ctx = 64, .n_batch = 8});
    sample::Sampler s(greedy, m->info().n_vocab);
    Generator g(*m, s);
    ASSERT_TRUE(g.prefill(prompts[i]));
    run(g, alone[i], 20);
  }
  const auto m = load_model(f, ModelOptions{.n_ctx = 64, .n_batch = 8, .n_seq = 2});
  sample::Sampler s0(greedy, m->info().n_vocab), s1(greedy, m->info().n_vocab);
  Generator g0(*m, s0, nullptr, 0), g1(*m, s1, nullptr, 1);
  ASSERT_TRUE(g0.prefill(prompts[0]));
  ASSERT_TRUE(g1.prefill(prompts[1]));
  std::vector<std::vector<int32_t>> turns(2);
  for (int i = 0; i < 20; ++i) {
    run(g0, turns[0], 1);
    run(g1, turns[1], 1);
  }
  EXPECT_EQ(turns, alone);
}

}  // namespace
}  // namespace moetier::model
