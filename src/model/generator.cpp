#include "model/generator.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>

#include "util/error.h"

namespace moetier::model {
namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Generator::Generator(Model& model, sample::Sampler& sampler, StepHooks* hooks, int seq)
    : model_(model), sampler_(&sampler), hooks_(hooks), seq_(seq), logits_(static_cast<size_t>(model.info().n_vocab)) {
  model_.set_sequence(seq_);  // checks the sequence exists
  history_.reserve(static_cast<size_t>(model.info().n_ctx));
  kept_.reserve(static_cast<size_t>(model.info().n_ctx));
}

bool Generator::prefill(std::span<const int32_t> tokens) {
  if (tokens.empty()) return true;
  const auto n = static_cast<int64_t>(tokens.size());
  if (n_past() + n > n_ctx())
    fail("the prompt is {} tokens but the context has {} of {} free: shorten it or raise -c", n, n_ctx() - n_past(),
         n_ctx());
  return run_prefill(tokens, true) == n;
}

int64_t Generator::run_prefill(std::span<const int32_t> tokens, bool stoppable) {
  const auto n = static_cast<int64_t>(tokens.size());
  if (hooks_) hooks_->begin(true);
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t n_batch = model_.info().n_batch;
  int64_t done = 0;
  for (int64_t i = 0; i < n; i += n_batch) {
    // One relaxed load per chunk of up to n_batch tokens: the cost of noticing Ctrl-C in a long prompt.
    if (stoppable && i > 0 && stop_ != nullptr && stop_->load(std::memory_order_relaxed) != 0) break;
    const int64_t len = std::min(n_batch, n - i);
    const auto chunk = tokens.subspan(static_cast<size_t>(i), static_cast<size_t>(len));
    const auto routing = routing_for(len);
    model_.set_sequence(seq_);
    model_.forward(chunk, n_past(), logits_, LogitsMode::last, routing);
    if (hooks_ && !routing.empty()) hooks_->routed(n_past(), len, routing);
    history_.insert(history_.end(), chunk.begin(), chunk.end());
    done += len;
  }
  have_logits_ = true;
  const double s = seconds_since(t0);
  prefill_tokens += done;
  prefill_seconds += s;
  if (hooks_) hooks_->end(true, done, s);
  return done;
}

void Generator::rewind(int64_t n) {
  assert(n >= 0 && n <= n_past());
  if (model_.can_keep(n, n_past())) {
    history_.resize(static_cast<size_t>(n));
  } else {
    // The model's state holds all n_past tokens and cannot forget the last ones: read the kept ones again from
    // position 0 (which starts the sequence over).
    kept_.assign(history_.begin(), history_.begin() + n);
    history_.clear();
    if (n > 0) run_prefill(kept_, false);
  }
  have_logits_ = false;
}

void Generator::record_routing() {
  const auto& info = model_.info();
  routing_per_token_ = static_cast<size_t>(info.n_moe_layers * info.n_expert_used);
  routing_.assign(static_cast<size_t>(info.n_batch) * routing_per_token_, -1);
}

std::span<int32_t> Generator::routing_for(int64_t n) {
  if (routing_.empty()) return {};
  return std::span<int32_t>(routing_).first(static_cast<size_t>(n) * routing_per_token_);
}

int32_t Generator::sample() {
  if (!have_logits_) fail("nothing to sample from: the context is empty");
  // A NaN or infinite logit (weights out of range in a damaged or hostile file, or an overflow; the kernels keep a
  // NaN activation NaN through every product) would otherwise pick tokens at random with no sign of it.
  if (const auto bad = std::ranges::find_if(logits_, [](float v) { return !std::isfinite(v); }); bad != logits_.end()) {
    fail("the forward pass gave a non-finite logit ({} for token {}) at position {}: the model's weights or "
         "activations are out of range; is the file damaged?",
         *bad, bad - logits_.begin(), n_past() - 1);
  }
  return sampler_->sample(logits_, history_);
}

void Generator::decode(int32_t token) {
  if (context_full()) fail("the context of {} tokens is full", n_ctx());
  if (hooks_) hooks_->begin(false);
  const auto t0 = std::chrono::steady_clock::now();
  const auto routing = routing_for(1);
  model_.set_sequence(seq_);
  model_.forward({&token, 1}, n_past(), logits_, LogitsMode::last, routing);
  if (hooks_ && !routing.empty()) hooks_->routed(n_past(), 1, routing);
  history_.push_back(token);
  have_logits_ = true;
  const double s = seconds_since(t0);
  ++decode_tokens;
  decode_seconds += s;
  if (hooks_) hooks_->end(false, 1, s);
}

}  // namespace moetier::model
