// The generator's stop flag (Ctrl-C in `run` and `chat`): a prefill stops at the next chunk boundary with the
// chunks run so far in the context and in its step, and rewind() drops them so the same context runs again as if
// they had never been there.
#include <atomic>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "model/generator.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "test_support.h"

namespace moetier::model {
namespace {

// Records the tokens of every step.
struct StepLog final : StepHooks {
  std::vector<int64_t> prefill_tokens;
  void begin(bool) override {}
  void end(bool prefill, int64_t n, double) override {
    if (prefill) prefill_tokens.push_back(n);
  }
};

TEST(GeneratorStop, PrefillStopsAtAChunkBoundaryAndRewindRestoresTheContext) {
  const auto f = gguf::GgufModel::open(test::oracle_dir() / "models/tiny-qwen3moe-Q4_K_M.gguf");
  const auto m = load_model(f, ModelOptions{.n_ctx = 64, .n_batch = 4});
  sample::SamplerParams greedy;
  greedy.temperature = 0.0f;
  sample::Sampler s(greedy, m->info().n_vocab);
  const std::vector<int32_t> turn1 = {1, 2, 3, 4, 5};
  const std::vector<int32_t> turn2 = {6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

  // The reference: both turns run without a stop.
  Generator ref(*m, s);
  ASSERT_TRUE(ref.prefill(turn1));
  ASSERT_TRUE(ref.prefill(turn2));
  const int32_t want = ref.sample();

  std::atomic<int> stop{0};
  StepLog log;
  Generator g(*m, s, &log);
  g.set_stop_flag(&stop);
  ASSERT_TRUE(g.prefill(turn1));
  stop = 2;  // as the SIGINT handler stores it
  EXPECT_FALSE(g.prefill(turn2));
  EXPECT_EQ(g.n_past(), 5 + 4);  // the first chunk of n_batch = 4 tokens ran, the other two did not
  EXPECT_EQ(g.prefill_tokens, 5 + 4);
  EXPECT_EQ(log.prefill_tokens, (std::vector<int64_t>{5, 4}));

  g.rewind(5);
  EXPECT_EQ(g.n_past(), 5);
  stop = 0;
  ASSERT_TRUE(g.prefill(turn2));
  EXPECT_EQ(g.n_past(), 15);
  EXPECT_EQ(g.sample(), want);  // the KV rows the stopped prefill wrote are overwritten, not read
}

}  // namespace
}  // namespace moetier::model
