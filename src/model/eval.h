// Teacher-forced evaluation and the comparisons made with its output, shared by the tests and `moetier eval`
// (whose token input model/token_input.h reads).
//
// A sequence of tokens is run as the reference does: tokens[0, n_prefill) as one batch (in chunks of the model's
// n_batch), then every later token alone, so both the batched and the one-token paths are exercised. Row i of
// the logits is the model's output after reading tokens[0..i]; it predicts tokens[i + 1].
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/generator.h"
#include "model/model.h"

namespace moetier::model {

struct EvalResult {
  int64_t n_rows = 0;
  int64_t n_vocab = 0;
  std::vector<float> logits;  // [n_rows, n_vocab]
  int64_t n_moe_layers = 0;
  int64_t n_expert_used = 0;
  std::vector<int32_t> routing;  // [n_rows, n_moe_layers, n_expert_used]: chosen experts, descending weight
  // Perplexity of tokens[1..] under rows [0, n_rows - 1): exp(mean negative log-likelihood); 0 if n_rows < 2.
  double perplexity = 0.0;
};

// Runs `tokens` from position 0 (tokens.size() <= n_ctx, n_prefill <= tokens.size()). `hooks`, when given, sees
// the steps a Generator takes (the prefill as one step, then each token) and every forward pass's routing, so a
// streaming store and the run recorder count an evaluation as they count a run.
EvalResult evaluate(Model& model, std::span<const int32_t> tokens, int64_t n_prefill, StepHooks* hooks = nullptr);

// Free-running greedy generation: runs `prompt` as one batch, then appends argmax tokens one at a time.
std::vector<int32_t> generate_greedy(Model& model, std::span<const int32_t> prompt, int64_t n_new);

// Row-by-row comparison of logits [n_rows, n_vocab] against reference logits of the same shape.
struct LogitsComparison {
  double mean_rel = 0.0;  // mean over rows of ||ours - ref||_2 / ||ref||_2
  double max_rel = 0.0;
  int64_t argmax_same = 0;  // rows whose argmax agrees
  double mean_kl = 0.0;     // mean over rows of KL(softmax(ref) || softmax(ours)), nats
  double max_kl = 0.0;
  int64_t n_rows = 0;
};
LogitsComparison compare_logits(std::span<const float> ours, std::span<const float> ref, int64_t n_vocab);

// Fraction of (row, layer) pairs whose expert sets are equal (order ignored). Shapes [rows, layers, k].
struct RoutingComparison {
  int64_t same = 0;
  int64_t total = 0;
};
RoutingComparison compare_routing(std::span<const int32_t> ours, std::span<const int32_t> ref, int64_t k);

}  // namespace moetier::model
