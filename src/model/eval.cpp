#include "model/eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "sample/greedy.h"
#include "util/error.h"

namespace moetier::model {

namespace {

// log-softmax of one row, in double.
void log_softmax(std::span<const float> x, std::vector<double>& out) {
  double mx = x[0];
  for (float v : x) mx = std::max(mx, static_cast<double>(v));
  double sum = 0.0;
  for (float v : x) sum += std::exp(v - mx);
  const double lse = mx + std::log(sum);
  out.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] - lse;
}

}  // namespace

EvalResult evaluate(Model& model, std::span<const int32_t> tokens, int64_t n_prefill, StepHooks* hooks) {
  const ModelInfo& mi = model.info();
  const auto n = static_cast<int64_t>(tokens.size());
  if (n < 1) fail("eval: no tokens to evaluate");
  if (n > mi.n_ctx) fail("eval: {} tokens do not fit the context of {} (raise -c)", n, mi.n_ctx);
  if (n_prefill < 0 || n_prefill > n) fail("eval: prefill length {} is outside 0..{}", n_prefill, n);
  EvalResult r;
  r.n_rows = n;
  r.n_vocab = mi.n_vocab;
  r.n_moe_layers = mi.n_moe_layers;
  r.n_expert_used = mi.n_expert_used;
  r.logits.resize(static_cast<size_t>(n * mi.n_vocab));
  const int64_t route_per_tok = mi.n_moe_layers * mi.n_expert_used;
  r.routing.resize(static_cast<size_t>(n * route_per_tok));
  auto run = [&](int64_t start, int64_t count) {
    const std::span<int32_t> routing = std::span<int32_t>(r.routing).subspan(
        static_cast<size_t>(start * route_per_tok), static_cast<size_t>(count * route_per_tok));
    model.forward(tokens.subspan(static_cast<size_t>(start), static_cast<size_t>(count)), start,
                  std::span<float>(r.logits).subspan(static_cast<size_t>(start * mi.n_vocab),
                                                     static_cast<size_t>(count * mi.n_vocab)),
                  LogitsMode::all, routing);
    if (hooks != nullptr && route_per_tok > 0) hooks->routed(start, count, routing);
  };
  // The steps a Generator would take: the prefill (in chunks of n_batch) as one step, then one step per token.
  const auto step = [&](bool prefill, int64_t start, int64_t count) {
    if (hooks != nullptr) hooks->begin(prefill);
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t s = start; s < start + count; s += prefill ? mi.n_batch : 1)
      run(s, prefill ? std::min(mi.n_batch, start + count - s) : 1);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (hooks != nullptr) hooks->end(prefill, count, seconds);
  };
  if (n_prefill > 0) step(true, 0, n_prefill);
  for (int64_t s = n_prefill; s < n; ++s) step(false, s, 1);

  if (n >= 2) {
    double nll = 0.0;
    std::vector<double> lp;
    for (int64_t i = 0; i + 1 < n; ++i) {
      log_softmax(std::span<const float>(r.logits).subspan(static_cast<size_t>(i * mi.n_vocab),
                                                           static_cast<size_t>(mi.n_vocab)),
                  lp);
      nll -= lp[static_cast<size_t>(tokens[static_cast<size_t>(i + 1)])];
    }
    r.perplexity = std::exp(nll / static_cast<double>(n - 1));
  }
  return r;
}

std::vector<int32_t> generate_greedy(Model& model, std::span<const int32_t> prompt, int64_t n_new) {
  const ModelInfo& mi = model.info();
  const auto n_prompt = static_cast<int64_t>(prompt.size());
  if (n_prompt < 1) fail("generate: empty prompt");
  if (n_prompt + n_new > mi.n_ctx) fail("generate: {} tokens do not fit the context of {}", n_prompt + n_new, mi.n_ctx);
  std::vector<float> logits(static_cast<size_t>(mi.n_vocab));
  for (int64_t s = 0; s < n_prompt; s += mi.n_batch) {
    const int64_t c = std::min(mi.n_batch, n_prompt - s);
    model.forward(prompt.subspan(static_cast<size_t>(s), static_cast<size_t>(c)), s, logits, LogitsMode::last);
  }
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(n_new));
  for (int64_t i = 0; i < n_new; ++i) {
    const int32_t next = sample::argmax(logits);
    out.push_back(next);
    if (i + 1 < n_new) model.forward(std::span<const int32_t>(&out.back(), 1), n_prompt + i, logits, LogitsMode::last);
  }
  return out;
}

LogitsComparison compare_logits(std::span<const float> ours, std::span<const float> ref, int64_t n_vocab) {
  if (ours.size() != ref.size() || n_vocab <= 0 || ref.size() % static_cast<size_t>(n_vocab) != 0) {
    fail("compare: logits sizes differ ({} vs {} floats, n_vocab {})", ours.size(), ref.size(), n_vocab);
  }
  LogitsComparison c;
  c.n_rows = static_cast<int64_t>(ref.size()) / n_vocab;
  std::vector<double> lo, lr;
  for (int64_t i = 0; i < c.n_rows; ++i) {
    const auto a = ours.subspan(static_cast<size_t>(i * n_vocab), static_cast<size_t>(n_vocab));
    const auto b = ref.subspan(static_cast<size_t>(i * n_vocab), static_cast<size_t>(n_vocab));
    double d2 = 0.0, r2 = 0.0;
    for (size_t j = 0; j < a.size(); ++j) {
      d2 += (static_cast<double>(a[j]) - b[j]) * (static_cast<double>(a[j]) - b[j]);
      r2 += static_cast<double>(b[j]) * b[j];
    }
    const double rel = r2 > 0.0 ? std::sqrt(d2 / r2) : std::sqrt(d2);
    c.mean_rel += rel;
    c.max_rel = std::max(c.max_rel, rel);
    if (sample::argmax(a) == sample::argmax(b)) ++c.argmax_same;
    log_softmax(a, lo);
    log_softmax(b, lr);
    double kl = 0.0;
    for (size_t j = 0; j < a.size(); ++j) kl += std::exp(lr[j]) * (lr[j] - lo[j]);
    c.mean_kl += kl;
    c.max_kl = std::max(c.max_kl, kl);
  }
  if (c.n_rows > 0) {
    c.mean_rel /= static_cast<double>(c.n_rows);
    c.mean_kl /= static_cast<double>(c.n_rows);
  }
  return c;
}

RoutingComparison compare_routing(std::span<const int32_t> ours, std::span<const int32_t> ref, int64_t k) {
  if (ours.size() != ref.size() || k <= 0 || ref.size() % static_cast<size_t>(k) != 0) {
    fail("compare: routing sizes differ ({} vs {} ids, k {})", ours.size(), ref.size(), k);
  }
  RoutingComparison c;
  const auto uk = static_cast<size_t>(k);
  std::vector<int32_t> a(uk), b(uk);
  for (size_t i = 0; i < ref.size(); i += uk) {
    std::copy_n(ours.begin() + static_cast<ptrdiff_t>(i), uk, a.begin());
    std::copy_n(ref.begin() + static_cast<ptrdiff_t>(i), uk, b.begin());
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    ++c.total;
    if (a == b) ++c.same;
  }
  return c;
}

}  // namespace moetier::model
