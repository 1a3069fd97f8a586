// The MoE block's result must not depend on the order an ExpertSource delivers experts in (a streaming cache
// delivers them as reads complete), and the override of experts per token must take effect.
#include <algorithm>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "model/eval.h"
#include "model/model.h"
#include "moe/resident_experts.h"
#include "test_support.h"

namespace moetier::model {
namespace {

// Delivers the requested experts in reverse order, in batches of 1, 2, 3, ... experts (a streaming cache
// delivers its hits together, then reads as they land), through a copy of each expert's request list.
class ReversedExperts final : public moe::ExpertSource {
 public:
  ReversedExperts(const gguf::GgufModel& f, const moe::ExpertShape& s) : inner_(f, s), order_(64), views_(64) {}
  const moe::ExpertShape& shape() const override { return inner_.shape(); }
  void fetch(int64_t layer, std::span<const int32_t> experts, moe::ExpertConsumer& c) override {
    ++fetches;
    std::copy(experts.rbegin(), experts.rend(), order_.begin());
    for (size_t i = 0; i < experts.size(); ++i) views_[i] = inner_.expert(layer, order_[i]);
    for (size_t i = 0, batch = 1; i < experts.size(); i += batch, ++batch) {
      const size_t n = std::min(batch, experts.size() - i);
      c.on_experts(std::span<const int32_t>(order_.data() + i, n),
                   std::span<const moe::ExpertWeights>(views_.data() + i, n));
      ++batches;
    }
  }
  int fetches = 0;
  int batches = 0;

 private:
  moe::ResidentExperts inner_;
  std::vector<int32_t> order_;
  std::vector<moe::ExpertWeights> views_;
};

TEST(ExpertSource, DeliveryOrderDoesNotChangeResults) {
  const gguf::GgufModel f = gguf::GgufModel::open(test::oracle_dir() / "models" / "micro-gptoss-F16.gguf");
  const std::vector<int32_t> tokens{1, 403, 407, 261, 378, 432, 383, 286, 261, 376};
  const auto a = load_model(f, ModelOptions{.n_ctx = 64});
  const EvalResult ra = evaluate(*a, tokens, 6);
  const moe::ExpertShape shape{
      .n_moe_layers = 2, .n_expert = 8, .n_embd = 128, .n_ff = 128, .has_bias = true, .moe_layers = {0, 1}};
  auto src = std::make_unique<ReversedExperts>(f, shape);
  ReversedExperts* raw = src.get();
  const auto b = load_model(f, ModelOptions{.n_ctx = 64}, std::move(src));
  const EvalResult rb = evaluate(*b, tokens, 6);
  EXPECT_EQ(ra.logits, rb.logits);
  EXPECT_EQ(ra.routing, rb.routing);
  EXPECT_EQ(raw->fetches, 2 * 5);  // one request per layer per forward call (1 prefill + 4 decode steps)
}

// The same with 8-bit activations (a Q4_K_M model: the integer kernels, all of a delivery's experts in one
// product pass) and two threads, which split each pass's rows by cost across the experts.
TEST(ExpertSource, DeliveryBatchesDoNotChangeResultsQuantized) {
  const gguf::GgufModel f = gguf::GgufModel::open(test::oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf");
  const std::vector<int32_t> tokens{1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 300, 301};
  for (int threads : {1, 2}) {
    const auto a = load_model(f, ModelOptions{.n_ctx = 64, .threads = threads});
    const EvalResult ra = evaluate(*a, tokens, 8);
    const moe::ExpertShape shape{
        .n_moe_layers = 4, .n_expert = 16, .n_embd = a->info().n_embd, .n_ff = 256, .moe_layers = {0, 1, 2, 3}};
    auto src = std::make_unique<ReversedExperts>(f, shape);
    ReversedExperts* raw = src.get();
    const auto b = load_model(f, ModelOptions{.n_ctx = 64, .threads = threads}, std::move(src));
    const EvalResult rb = evaluate(*b, tokens, 8);
    EXPECT_EQ(ra.logits, rb.logits) << threads << " threads";
    EXPECT_EQ(ra.routing, rb.routing) << threads << " threads";
    EXPECT_GT(raw->batches, raw->fetches);  // some fetches were delivered in several batches
  }
}

TEST(ExpertSource, ExpertsUsedOverride) {
  const gguf::GgufModel f = gguf::GgufModel::open(test::oracle_dir() / "models" / "micro-qwen3moe-F16.gguf");
  const auto m = load_model(f, ModelOptions{.n_ctx = 64, .n_expert_used = 3});
  EXPECT_EQ(m->info().n_expert_used, 3);
  const std::vector<int32_t> tokens{1, 403, 407};
  const EvalResult r = evaluate(*m, tokens, 3);
  ASSERT_EQ(r.routing.size(), 3u * 2u * 3u);
  for (size_t i = 0; i < r.routing.size(); i += 3) {  // three distinct experts per (token, layer)
    EXPECT_NE(r.routing[i], r.routing[i + 1]);
    EXPECT_NE(r.routing[i], r.routing[i + 2]);
    EXPECT_NE(r.routing[i + 1], r.routing[i + 2]);
  }
}

}  // namespace
}  // namespace moetier::model
