#include "sample/sampler.h"

#include <algorithm>
#include <cmath>

#include "sample/greedy.h"
#include "util/error.h"

namespace moetier::sample {

namespace {

// NaN fails every comparison, so each check is written to fail for it too.
void check_params(const SamplerParams& p, int64_t n_vocab) {
  if (n_vocab < 1) fail("sampler: n_vocab {} must be at least 1", n_vocab);
  if (!(p.temperature >= 0.0f && std::isfinite(p.temperature)))
    fail("sampler: temperature {} must be a finite number >= 0", p.temperature);
  if (p.top_k < 0) fail("sampler: top_k {} must be >= 0", p.top_k);
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) fail("sampler: top_p {} must be in (0, 1]", p.top_p);
  if (!(p.min_p >= 0.0f && p.min_p < 1.0f)) fail("sampler: min_p {} must be in [0, 1)", p.min_p);
  if (!(p.repeat_penalty > 0.0f && std::isfinite(p.repeat_penalty)))
    fail("sampler: repeat_penalty {} must be a finite number > 0", p.repeat_penalty);
  if (p.repeat_last_n < 0) fail("sampler: repeat_last_n {} must be >= 0", p.repeat_last_n);
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f))
    fail("sampler: presence_penalty {} must be a number in [-2, 2]", p.presence_penalty);
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f))
    fail("sampler: frequency_penalty {} must be a number in [-2, 2]", p.frequency_penalty);
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0 || id >= n_vocab) fail("sampler: logit_bias token {} is outside the vocabulary (0..{})", id, n_vocab - 1);
    if (!(bias >= -100.0f && bias <= 100.0f)) fail("sampler: logit_bias {} of token {} must be in [-100, 100]", bias, id);
  }
  for (const int32_t id : p.banned) {
    if (id < 0 || id >= n_vocab) fail("sampler: banned token {} is outside the vocabulary (0..{})", id, n_vocab - 1);
  }
}

}  // namespace

Sampler::Sampler(const SamplerParams& p, int64_t n_vocab)
    : p_(p), cand_(static_cast<size_t>(n_vocab > 0 ? n_vocab : 0)), prob_(cand_.size()), rng_(p.seed) {
  check_params(p, n_vocab);
}

double Sampler::uniform01() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  const size_t n_vocab = cand_.size();
  const bool penalties =
      p_.repeat_last_n > 0 && (p_.repeat_penalty != 1.0f || p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f);
  if (p_.temperature <= 0.0f && !penalties && p_.logit_bias.empty() && p_.banned.empty()) return argmax(logits);

  for (size_t i = 0; i < n_vocab; ++i) cand_[i] = {static_cast<int32_t>(i), logits[i]};
  for (const auto& [id, bias] : p_.logit_bias) cand_[static_cast<size_t>(id)].logit += bias;
  for (const int32_t id : p_.banned) cand_[static_cast<size_t>(id)].logit = -INFINITY;
  if (penalties) {
    // llama.cpp's penalties sampler: each token seen in the window is penalised once, first by the repeat
    // penalty, then by frequency_penalty x its count and presence_penalty. prob_ (unused until the softmax
    // below) holds the counts, so this needs no allocation: zeroed at the window's ids, counted, then read once
    // per distinct id (its count set to -1 once applied).
    const size_t n = std::min(history.size(), static_cast<size_t>(p_.repeat_last_n));
    const auto window = history.subspan(history.size() - n);
    for (const int32_t t : window) {
      if (static_cast<size_t>(t) < n_vocab) prob_[static_cast<size_t>(t)] = 0.0f;
    }
    for (const int32_t t : window) {
      if (static_cast<size_t>(t) < n_vocab) prob_[static_cast<size_t>(t)] += 1.0f;
    }
    for (const int32_t t : window) {
      const auto id = static_cast<size_t>(t);
      if (id >= n_vocab || prob_[id] < 0.0f) continue;  // out of the vocabulary, or already penalised
      const float count = prob_[id];
      float& l = cand_[id].logit;
      l = l > 0.0f ? l / p_.repeat_penalty : l * p_.repeat_penalty;
      l -= count * p_.frequency_penalty + p_.presence_penalty;
      prob_[id] = -1.0f;
    }
  }
  size_t n = n_vocab;
  auto by_logit = [](const Candidate& a, const Candidate& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); };
  if (p_.temperature <= 0.0f) return std::min_element(cand_.begin(), cand_.end(), by_logit)->id;

  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < n) {
    std::partial_sort(cand_.begin(), cand_.begin() + p_.top_k, cand_.end(), by_logit);
    n = static_cast<size_t>(p_.top_k);
  } else {
    std::sort(cand_.begin(), cand_.end(), by_logit);
  }
  // Softmax over the survivors (at temperature 1, as the top-p and min-p filters are defined).
  auto softmax = [&](float temp) {
    const float mx = cand_[0].logit;
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) {
      prob_[i] = std::exp((cand_[i].logit - mx) / temp);
      sum += prob_[i];
    }
    for (size_t i = 0; i < n; ++i) prob_[i] = static_cast<float>(prob_[i] / sum);
  };
  softmax(1.0f);
  if (p_.top_p < 1.0f) {
    double cum = 0.0;
    size_t keep = n;
    for (size_t i = 0; i < n; ++i) {
      cum += prob_[i];
      if (cum >= p_.top_p) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
  }
  if (p_.min_p > 0.0f) {
    const float floor = p_.min_p * prob_[0];
    size_t keep = 1;
    while (keep < n && prob_[keep] >= floor) ++keep;
    n = keep;
  }
  softmax(p_.temperature);
  double r = uniform01();
  for (size_t i = 0; i < n; ++i) {
    r -= prob_[i];
    if (r < 0.0) return cand_[i].id;
  }
  return cand_[n - 1].id;  // rounding left a sliver of probability: the last survivor
}

}  // namespace moetier::sample
