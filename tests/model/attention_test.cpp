// Attention's work split (model/attention.cpp): tasks of one token's query heads that share a KV head, halved
// when there are fewer tasks than threads (decode), must not change a single bit of the logits.
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "model/eval.h"
#include "model/model.h"
#include "test_support.h"

namespace moetier::model {
namespace {

// tiny-qwen3moe: 4 query heads in 2 KV groups. A decode step has 2 (token, KV head) tasks, so 4 threads split
// each group's 2 heads into 2 tasks of 1; 1 thread takes whole groups; prefill rows have enough tasks.
TEST(Attention, ThreadsAndHeadSplitsGiveIdenticalLogits) {
  const gguf::GgufModel f = gguf::GgufModel::open(test::oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf");
  const std::vector<int32_t> tokens{1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 300, 301};
  const auto one = load_model(f, ModelOptions{.n_ctx = 64, .threads = 1});
  const EvalResult a = evaluate(*one, tokens, 6);  // 6 tokens as one batch, then 6 decode steps
  for (int threads : {2, 3, 4}) {
    const auto many = load_model(f, ModelOptions{.n_ctx = 64, .threads = threads});
    const EvalResult b = evaluate(*many, tokens, 6);
    EXPECT_EQ(a.logits, b.logits) << threads << " threads";
    EXPECT_EQ(a.routing, b.routing) << threads << " threads";
  }
}

}  // namespace
}  // namespace moetier::model
