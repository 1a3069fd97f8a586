// The server's prompt reuse on a model with recurrent layers (Slot::reusable, Model::can_keep): a slot reuses its
// context only when the whole of it begins the next prompt, never a shorter common prefix, which would carry the
// previous request's recurrent state; an attention-only model still reuses any common prefix.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "server/slot.h"
#include "server/task.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace moetier::model {
namespace {

// Runs one completion of `prompt` (greedy, at most `n` tokens) on `slot` to its end.
void complete(server::Slot& slot, const std::vector<int32_t>& prompt, int64_t vocab, int64_t n) {
  auto task = std::make_shared<server::Task>();
  task->req.chat = false;
  task->req.max_tokens = n;
  task->req.sampling.temperature = 0.0f;
  task->prompt = prompt;
  task->sampler = std::make_unique<sample::Sampler>(task->req.sampling, vocab);
  slot.start(task);
  while (slot.busy()) slot.step();
}

struct SlotCase {
  gguf::GgufModel file;
  std::unique_ptr<Model> model;
  tokenizer::Tokenizer tok;
  server::Slot slot;

  explicit SlotCase(const std::string& name)
      : file(gguf::GgufModel::open(test::oracle_model(name))),
        model(load_model(file, ModelOptions{.n_ctx = 128, .n_batch = 8})),
        tok(tokenizer::Tokenizer::from_metadata(file.metadata())),
        slot(0, *model, tok, nullptr, false, {}) {}
};

TEST(Qwen35Slot, ReusesOnlyTheWholeContext) {
  SlotCase c("tiny-qwen35moe-Q8_0");
  const int64_t V = c.model->info().n_vocab;
  const std::vector<int32_t> a = {1, 5, 9, 13, 17, 21, 25, 29, 33, 37};
  complete(c.slot, a, V, 4);  // the context: a and the reply's tokens but the last (sampled, never run)
  std::vector<int32_t> diverging(a.begin(), a.begin() + 6);
  diverging.insert(diverging.end(), {100, 101, 102});
  EXPECT_EQ(c.slot.reusable(diverging), 0);  // 6 tokens in common, but the state holds all of a and more
  std::vector<int32_t> longer = a;
  longer.push_back(7);
  EXPECT_EQ(c.slot.reusable(longer), 0);  // a alone is not the slot's whole context either

  // A prompt that continues the whole context reuses all of it.
  complete(c.slot, a, V, 1);  // max_tokens 1: the reply's one token is sampled, not run: the context is a
  EXPECT_EQ(c.slot.reusable(longer), static_cast<int64_t>(a.size()));
  EXPECT_EQ(c.slot.reusable(a), 0);  // the last prompt token is always run, and a part of a cannot be kept
}

TEST(Qwen35Slot, AttentionOnlyModelStillReusesACommonPrefix) {
  SlotCase c("tiny-qwen3moe-Q8_0");
  const int64_t V = c.model->info().n_vocab;
  const std::vector<int32_t> a = {1, 5, 9, 13, 17, 21, 25, 29, 33, 37};
  complete(c.slot, a, V, 4);
  std::vector<int32_t> diverging(a.begin(), a.begin() + 6);
  diverging.insert(diverging.end(), {100, 101, 102});
  EXPECT_EQ(c.slot.reusable(diverging), 6);
}

}  // namespace
}  // namespace moetier::model
