#include "model/moe_ffn.h"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace moetier::model {

MoeFfn::MoeFfn(const RouterConfig& router, const GluConfig& glu, int64_t n_embd, int64_t n_ff, int64_t max_tok)
    : router_(router),
      glu_(glu),
      n_embd_(n_embd),
      n_ff_(n_ff),
      logits_(static_cast<size_t>(max_tok * router.n_expert)),
      probs_(static_cast<size_t>(router.n_expert)),
      ids_(static_cast<size_t>(max_tok * router.n_used)),
      weights_(static_cast<size_t>(max_tok * router.n_used)),
      count_(static_cast<size_t>(router.n_expert)),
      start_(static_cast<size_t>(router.n_expert)),
      slots_(static_cast<size_t>(max_tok * router.n_used)),
      chosen_(static_cast<size_t>(router.n_expert)),
      xg_(static_cast<size_t>(max_tok * n_embd)),
      gate_(static_cast<size_t>(max_tok * n_ff)),
      up_(static_cast<size_t>(max_tok * n_ff)),
      yg_(static_cast<size_t>(max_tok * n_embd)),
      per_slot_(static_cast<size_t>(max_tok * router.n_used * n_embd)) {}

void MoeFfn::forward(int64_t layer, const RouterWeights& rw, moe::ExpertSource& experts, const float* x,
                     int64_t n_tok, float* out, int32_t* routing, quant::MatmulScratch& mm) {
  const int64_t E = router_.n_expert, K = router_.n_used, D = n_embd_;
  quant::matmul(rw.gate_inp, x, logits_.data(), n_tok, mm);
  std::fill(count_.begin(), count_.end(), 0);
  if (override_ != nullptr) {
    override_->route(layer, n_tok, ids_.data(), weights_.data());
    for (int64_t ts = 0; ts < n_tok * K; ++ts) ++count_[static_cast<size_t>(ids_[static_cast<size_t>(ts)])];
  } else {
    for (int64_t t = 0; t < n_tok; ++t) {
      float* lg = logits_.data() + t * E;
      if (!rw.bias.empty()) {
        for (int64_t e = 0; e < E; ++e) lg[e] += rw.bias[static_cast<size_t>(e)];
      }
      route(router_, lg, probs_.data(), ids_.data() + t * K, weights_.data() + t * K);
      for (int64_t s = 0; s < K; ++s) ++count_[static_cast<size_t>(ids_[static_cast<size_t>(t * K + s)])];
    }
  }
  if (routing != nullptr) std::copy(ids_.begin(), ids_.begin() + n_tok * K, routing);

  // Group (token, slot) pairs by expert: counting sort keeps tokens in order within an expert.
  int32_t n_chosen = 0, offset = 0;
  for (int64_t e = 0; e < E; ++e) {
    start_[static_cast<size_t>(e)] = offset;
    offset += count_[static_cast<size_t>(e)];
    if (count_[static_cast<size_t>(e)] > 0) chosen_[static_cast<size_t>(n_chosen++)] = static_cast<int32_t>(e);
    count_[static_cast<size_t>(e)] = 0;
  }
  for (int64_t ts = 0; ts < n_tok * K; ++ts) {
    const auto e = static_cast<size_t>(ids_[static_cast<size_t>(ts)]);
    slots_[static_cast<size_t>(start_[e] + count_[e]++)] = static_cast<int32_t>(ts);
  }

  x_ = x;
  mm_ = &mm;
  experts.fetch(layer, std::span<const int32_t>(chosen_.data(), static_cast<size_t>(n_chosen)), *this);

  for (int64_t t = 0; t < n_tok; ++t) {
    float* o = out + t * D;
    std::memcpy(o, per_slot_.data() + t * K * D, sizeof(float) * static_cast<size_t>(D));
    for (int64_t s = 1; s < K; ++s) {
      const float* p = per_slot_.data() + (t * K + s) * D;
      for (int64_t i = 0; i < D; ++i) o[i] += p[i];
    }
  }
}

void MoeFfn::on_expert(int32_t expert, const moe::ExpertWeights& w) {
  const int64_t K = router_.n_used, D = n_embd_, F = n_ff_;
  const auto e = static_cast<size_t>(expert);
  const int32_t* slots = slots_.data() + start_[e];
  const int64_t n = count_[e];
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = slots[i] / K;
    std::memcpy(xg_.data() + i * D, x_ + t * D, sizeof(float) * static_cast<size_t>(D));
  }
  const quant::Product gate_up[] = {{w.gate, gate_.data()}, {w.up, up_.data()}};
  quant::matmul_shared_x(gate_up, xg_.data(), n, *mm_);
  for (int64_t i = 0; i < n; ++i) {
    float* g = gate_.data() + i * F;
    float* u = up_.data() + i * F;
    if (w.gate_bias != nullptr) {
      for (int64_t j = 0; j < F; ++j) g[j] += w.gate_bias[j];
    }
    if (w.up_bias != nullptr) {
      for (int64_t j = 0; j < F; ++j) u[j] += w.up_bias[j];
    }
    glu(glu_, g, u, g, F);
  }
  quant::matmul(w.down, gate_.data(), yg_.data(), n, *mm_);
  for (int64_t i = 0; i < n; ++i) {
    const float wt = weights_[static_cast<size_t>(slots[i])];
    const float* y = yg_.data() + i * D;
    float* dst = per_slot_.data() + static_cast<int64_t>(slots[i]) * D;
    for (int64_t j = 0; j < D; ++j) dst[j] = wt * (y[j] + (w.down_bias != nullptr ? w.down_bias[j] : 0.0f));
  }
}

}  // namespace moetier::model
