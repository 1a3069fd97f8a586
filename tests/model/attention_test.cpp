// Attention's work split (model/attention.cpp): tasks of one token's query heads that share a KV head, halved
// when there are fewer tasks than threads (decode), must not change a single bit of the logits.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "model/eval.h"
#include "model/model.h"
#include "test_support.h"

namespace moetier::model {
namespace {

// tiny-qwen3moe: 4 query heads in 2 KV groups; tiny-gptoss: 8 in 2, with attention sinks and a 128-token sliding
// window on alternate layers (140 tokens cross it). A decode step has 2 (token, KV head) tasks, so 3 and 4
// threads split each group in halves; 1 thread takes whole groups; prefill rows have enough tasks. The 132-token
// batch also puts the MoE layer's per-row steps (528 slots x 256) and its experts' activation quantization over
// the 64 K values from which they run on the pool's threads (moe_ffn.cpp, matmul.cpp).
TEST(Attention, ThreadsAndHeadSplitsGiveIdenticalLogits) {
  for (const char* name : {"tiny-qwen3moe-Q4_K_M", "tiny-gptoss-MXFP4"}) {
    const gguf::GgufModel f = gguf::GgufModel::open(test::oracle_dir() / "models" / (std::string(name) + ".gguf"));
    std::vector<int32_t> tokens;
    for (int32_t i = 0; i < 140; ++i) tokens.push_back(1 + (i * 37) % 500);
    const auto one = load_model(f, ModelOptions{.n_ctx = 160, .threads = 1});
    const EvalResult a = evaluate(*one, tokens, 132);  // 132 tokens as one batch, then 8 decode steps
    for (int threads : {2, 3, 4}) {
      const auto many = load_model(f, ModelOptions{.n_ctx = 160, .threads = threads});
      const EvalResult b = evaluate(*many, tokens, 132);
      EXPECT_EQ(a.logits, b.logits) << name << ", " << threads << " threads";
      EXPECT_EQ(a.routing, b.routing) << name << ", " << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace moetier::model
