#include "model/route_replay.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include "util/error.h"

namespace moetier::model {

RouteReplay::RouteReplay(const trace::RouteTrace& trace, std::string name)
    : header_(trace.header), name_(std::move(name)), k_(trace.header.n_expert_used) {
  const trace::TraceHeader& h = header_;
  if (h.n_moe_layers <= 0 || h.n_expert <= 0 || k_ <= 0 || k_ > h.n_expert) {
    fail("route replay: {} has n_layer={} n_expert={} n_expert_used={}; all must be > 0, top-k at most n_expert",
         name_, h.n_moe_layers, h.n_expert, k_);
  }
  // Tokens in (phase, turn, step) order: prefill first, then decode.
  using Tok = std::tuple<uint8_t, int32_t, int64_t>;
  std::vector<Tok> toks;
  toks.reserve(trace.rows.size() / static_cast<size_t>(h.n_moe_layers * k_) + 1);
  for (const auto& r : trace.rows) toks.emplace_back(r.phase, r.turn, r.step);
  std::sort(toks.begin(), toks.end());
  toks.erase(std::unique(toks.begin(), toks.end()), toks.end());
  for (const Tok& t : toks) (std::get<0>(t) == 0 ? n_prefill_ : n_decode_) += 1;

  const auto L = static_cast<size_t>(h.n_moe_layers), K = static_cast<size_t>(k_);
  ids_.assign(toks.size() * L * K, -1);
  weights_.assign(toks.size() * L * K, std::nanf(""));
  for (const auto& r : trace.rows) {
    if (r.layer < 0 || r.layer >= h.n_moe_layers || r.slot < 0 || r.slot >= k_ || r.expert < 0 ||
        r.expert >= h.n_expert) {
      fail("route replay: {}: step {} layer {} slot {} expert {} is outside the trace's {} layers x {} experts, "
           "top-{}",
           name_, r.step, r.layer, r.slot, r.expert, h.n_moe_layers, h.n_expert, k_);
    }
    const auto t = static_cast<size_t>(
        std::lower_bound(toks.begin(), toks.end(), Tok{r.phase, r.turn, r.step}) - toks.begin());
    const size_t at = (t * L + static_cast<size_t>(r.layer)) * K + static_cast<size_t>(r.slot);
    ids_[at] = r.expert;
    weights_[at] = r.weight;
  }
  // A token may lack a layer entirely: recording engines skip the last layer for every prompt token but the last
  // (only the last token's logits are needed). Such a token replays the routing of the nearest token of the same
  // turn and phase that has the layer (later first), so each layer's batch holds exactly the recorded experts.
  auto absent = [&](size_t t, size_t l) { return ids_[(t * L + l) * K] < 0 && ids_[(t * L + l) * K + K - 1] < 0; };
  auto same_group = [&](size_t a, size_t b) {
    return std::get<0>(toks[a]) == std::get<0>(toks[b]) && std::get<1>(toks[a]) == std::get<1>(toks[b]);
  };
  for (size_t l = 0; l < L; ++l) {
    for (size_t t = 0; t < toks.size(); ++t) {
      if (!absent(t, l)) continue;
      size_t from = toks.size();
      for (size_t u = t + 1; u < toks.size() && same_group(u, t) && from == toks.size(); ++u) {
        if (!absent(u, l)) from = u;
      }
      for (size_t u = t; u-- > 0 && same_group(u, t) && from == toks.size();) {
        if (!absent(u, l)) from = u;
      }
      if (from == toks.size()) continue;  // reported below
      std::copy_n(ids_.data() + (from * L + l) * K, K, ids_.data() + (t * L + l) * K);
      std::copy_n(weights_.data() + (from * L + l) * K, K, weights_.data() + (t * L + l) * K);
      ++n_filled_;
    }
  }
  for (size_t t = 0; t < toks.size(); ++t) {
    for (size_t l = 0; l < L; ++l) {
      int32_t* id = ids_.data() + (t * L + l) * K;
      float* w = weights_.data() + (t * L + l) * K;
      bool recorded = true;
      for (size_t s = 0; s < K; ++s) {
        if (id[s] < 0) {
          fail("route replay: {}: turn {} step {} layer {} has no slot {} (each routed token needs top-{} rows)",
               name_, std::get<1>(toks[t]), std::get<2>(toks[t]), l, s, k_);
        }
        for (size_t u = 0; u < s; ++u) {
          if (id[u] == id[s]) fail("route replay: {}: step {} layer {} routes expert {} twice", name_,
                                   std::get<2>(toks[t]), l, id[s]);
        }
        recorded = recorded && std::isfinite(w[s]);
      }
      if (!recorded) std::fill(w, w + K, 1.0f / static_cast<float>(K));
    }
  }
  prefill_cursor_.assign(L, 0);
  decode_cursor_.assign(L, 0);
}

void RouteReplay::check_model(int64_t n_moe_layers, int64_t n_expert, int64_t k) const {
  if (n_moe_layers != header_.n_moe_layers || n_expert != header_.n_expert) {
    fail("route replay: {} was recorded on {} layers x {} experts, but the model has {} MoE layers x {} experts",
         name_, header_.n_moe_layers, header_.n_expert, n_moe_layers, n_expert);
  }
  if (k > 0 && k != k_) {
    fail("route replay: {} routes top-{} but the model uses top-{} (give --n-expert-used {})", name_, k_, k, k_);
  }
}

void RouteReplay::route(int64_t layer, int64_t n_tok, int32_t* ids, float* weights) {
  const bool prefill = n_tok > 1;
  int64_t& cur = (prefill ? prefill_cursor_ : decode_cursor_)[static_cast<size_t>(layer)];
  const int64_t have = prefill ? n_prefill_ : n_decode_;
  if (cur + n_tok > have) {
    fail("route replay: {} holds {} {} tokens; the run needs more ({} so far in layer {}, {} more asked){}", name_,
         have, prefill ? "prefill" : "decode", cur, layer, n_tok,
         prefill ? ": use a shorter prompt" : ": generate fewer tokens (-n)");
  }
  const int64_t first = prefill ? cur : n_prefill_ + cur;
  const auto L = static_cast<size_t>(header_.n_moe_layers), K = static_cast<size_t>(k_);
  for (int64_t t = 0; t < n_tok; ++t) {
    const size_t from = (static_cast<size_t>(first + t) * L + static_cast<size_t>(layer)) * K;
    std::copy_n(ids_.data() + from, K, ids + static_cast<size_t>(t) * K);
    std::copy_n(weights_.data() + from, K, weights + static_cast<size_t>(t) * K);
  }
  cur += n_tok;
}

}  // namespace moetier::model
