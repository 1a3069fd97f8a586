#include "model/moe_ffn.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "util/thread_pool.h"

namespace moetier::model {

namespace {

// f(k0, k1) for the items [0, n) in equal ranges over the pool's threads when there are at least min_items of
// them (enough to pay for waking the threads, ~10 us), else on this thread.
template <class F>
void over_items(util::ThreadPool* pool, int64_t n, int64_t min_items, const F& f) {
  if (pool == nullptr || pool->size() == 1 || n < std::max<int64_t>(min_items, 2)) {
    f(int64_t{0}, n);
    return;
  }
  const int64_t k = pool->size();
  pool->run([&](int i) { f(n * i / k, n * (i + 1) / k); });
}

// The per-row steps around the products (the rows' copies, biases, GLU, weighting and sum) go over the threads
// from this many floats of work (a prompt's rows; decode's few stay on one thread). On one thread they left the
// other waiting: 512-token prefill at -t 2, 3 alternated runs, gpt-oss-20b 80.8 -> 82.9 tok/s (its biases and GLU
// with exponentials); Qwen3-30B-A3B 60 -> 65 in one.
constexpr int64_t kMinParallelValues = int64_t{64} << 10;
int64_t min_rows(int64_t width) { return (kMinParallelValues + width - 1) / width; }

}  // namespace

MoeFfn::MoeFfn(const RouterConfig& router, const GluConfig& glu, int64_t n_embd, int64_t n_ff, int64_t max_tok)
    : router_(router),
      glu_(glu),
      n_embd_(n_embd),
      n_ff_(n_ff),
      logits_(static_cast<size_t>(max_tok * router.n_expert)),
      probs_(static_cast<size_t>(max_tok * router.n_expert)),
      ids_(static_cast<size_t>(max_tok * router.n_expert_used)),
      weights_(static_cast<size_t>(max_tok * router.n_expert_used)),
      count_(static_cast<size_t>(router.n_expert)),
      start_(static_cast<size_t>(router.n_expert)),
      slots_(static_cast<size_t>(max_tok * router.n_expert_used)),
      pos_(static_cast<size_t>(max_tok * router.n_expert_used)),
      chosen_(static_cast<size_t>(router.n_expert)),
      xg_(static_cast<size_t>(max_tok * router.n_expert_used * n_embd)),
      gate_(static_cast<size_t>(max_tok * router.n_expert_used * n_ff)),
      up_(static_cast<size_t>(max_tok * router.n_expert_used * n_ff)),
      per_slot_(static_cast<size_t>(max_tok * router.n_expert_used * n_embd)),
      products_(static_cast<size_t>(2 * router.n_expert)),
      groups_(static_cast<size_t>(router.n_expert)) {}

void MoeFfn::forward(int64_t layer, const RouterWeights& rw, moe::ExpertSource& experts, const float* x,
                     const float* xr, int64_t n_tok, float* out, int32_t* routing, compute::Backend& be) {
  const int64_t K = router_.n_expert_used, D = n_embd_;
  be.matmul(rw.gate_inp, xr != nullptr ? xr : x, logits_.data(), n_tok);
  route_batch(layer, rw, logits_.data(), n_tok, routing, be.host_pool());
  x_ = x;
  rw_ = &rw;
  n_tok_ = n_tok;
  be_ = &be;
  experts.fetch(layer, chosen(), *this);

  const auto slot_out = [&](int64_t ts) { return per_slot_.data() + pos_[static_cast<size_t>(ts)] * D; };
  over_items(be.host_pool(), n_tok, min_rows(K * D), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* o = out + t * D;
      std::memcpy(o, slot_out(t * K), sizeof(float) * static_cast<size_t>(D));
      for (int64_t s = 1; s < K; ++s) {
        const float* p = slot_out(t * K + s);
        for (int64_t i = 0; i < D; ++i) o[i] += p[i];
      }
    }
  });
}

template <class F>
void MoeFfn::over_slots(std::span<const int32_t> experts, int64_t width, const F& f) {
  int64_t total = 0;
  for (const int32_t e : experts) total += count_[static_cast<size_t>(e)];
  over_items(be_->host_pool(), total, min_rows(width), [&](int64_t a, int64_t b) {
    int64_t base = 0;
    for (size_t i = 0; i < experts.size() && base < b; ++i) {
      const auto e = static_cast<size_t>(experts[i]);
      const int64_t p0 = start_[e], nt = count_[e];
      for (int64_t k = std::max<int64_t>(a - base, 0); k < std::min(b - base, nt); ++k) f(i, p0 + k);
      base += nt;
    }
  });
}

void MoeFfn::compute_experts(int64_t layer, moe::ExpertSource& source, std::span<const int32_t> experts,
                             const float* x, int64_t n_tok, compute::Backend& be) {
  x_ = x;
  rw_ = nullptr;
  n_tok_ = n_tok;
  be_ = &be;
  weigh_ = false;
  try {
    source.fetch(layer, experts, *this);
  } catch (...) {
    weigh_ = true;
    throw;
  }
  weigh_ = true;
}

void MoeFfn::route_batch(int64_t layer, const RouterWeights& rw, float* lg, int64_t n_tok, int32_t* routing,
                         util::ThreadPool* pool) {
  const int64_t E = router_.n_expert, K = router_.n_expert_used;
  std::fill(count_.begin(), count_.end(), 0);
  if (override_ != nullptr) {
    override_->route(layer, n_tok, ids_.data(), weights_.data());
    for (int64_t ts = 0; ts < n_tok * K; ++ts) ++count_[static_cast<size_t>(ids_[static_cast<size_t>(ts)])];
  } else {
    // Each token reads and writes only its own rows (logits, probs, ids, weights): any split gives the same bits.
    const auto route_tokens = [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        float* l = lg + t * E;
        if (!rw.bias.empty()) {
          for (int64_t e = 0; e < E; ++e) l[e] += rw.bias[static_cast<size_t>(e)];
        }
        route(router_, l, probs_.data() + t * E, ids_.data() + t * K, weights_.data() + t * K);
      }
    };
    over_items(pool, n_tok, kParallelRouteTokens, route_tokens);
    for (int64_t ts = 0; ts < n_tok * K; ++ts) ++count_[static_cast<size_t>(ids_[static_cast<size_t>(ts)])];
  }
  if (routing != nullptr) std::copy(ids_.begin(), ids_.begin() + n_tok * K, routing);

  // Group (token, slot) pairs by expert: counting sort keeps tokens in order within an expert.
  int32_t offset = 0;
  n_chosen_ = 0;
  for (int64_t e = 0; e < E; ++e) {
    start_[static_cast<size_t>(e)] = offset;
    offset += count_[static_cast<size_t>(e)];
    if (count_[static_cast<size_t>(e)] > 0) chosen_[static_cast<size_t>(n_chosen_++)] = static_cast<int32_t>(e);
    count_[static_cast<size_t>(e)] = 0;
  }
  for (int64_t ts = 0; ts < n_tok * K; ++ts) {
    const auto e = static_cast<size_t>(ids_[static_cast<size_t>(ts)]);
    const int32_t p = start_[e] + count_[e]++;
    slots_[static_cast<size_t>(p)] = static_cast<int32_t>(ts);
    pos_[static_cast<size_t>(ts)] = p;
  }
}

void MoeFfn::on_experts(std::span<const int32_t> experts, std::span<const moe::ExpertWeights> weights) {
  assert(experts.size() == weights.size() && !experts.empty());
  const int64_t K = router_.n_expert_used, D = n_embd_, F = n_ff_;
  const size_t n = experts.size();
  // Gate and up of every expert of the delivery, each on its own tokens' rows. An expert that every token chose
  // (at decode, each of them) reads x itself, so matmul_groups quantizes it once for all of them.
  for (size_t i = 0; i < n; ++i) {
    const auto e = static_cast<size_t>(experts[i]);
    const int64_t p0 = start_[e], nt = count_[e];
    const float* xe = nt < n_tok_ ? xg_.data() + p0 * D : x_;
    products_[2 * i] = {weights[i].gate, gate_.data() + p0 * F};
    products_[2 * i + 1] = {weights[i].up, up_.data() + p0 * F};
    groups_[i] = {std::span<const quant::Product>(products_.data() + 2 * i, 2), xe, nt, n_tok_ > 1};
  }
  over_slots(experts, D, [&](size_t i, int64_t p) {
    if (count_[static_cast<size_t>(experts[i])] == n_tok_) return;
    const int64_t t = slots_[static_cast<size_t>(p)] / K;
    std::memcpy(xg_.data() + p * D, x_ + t * D, sizeof(float) * static_cast<size_t>(D));
  });
  be_->matmul_groups(std::span<const quant::ProductGroup>(groups_.data(), n));
  over_slots(experts, F, [&](size_t i, int64_t p) {
    const moe::ExpertWeights& w = weights[i];
    float* g = gate_.data() + p * F;
    float* u = up_.data() + p * F;
    if (w.gate_bias != nullptr) {
      for (int64_t j = 0; j < F; ++j) g[j] += w.gate_bias[j];
    }
    if (w.up_bias != nullptr) {
      for (int64_t j = 0; j < F; ++j) u[j] += w.up_bias[j];
    }
    glu(glu_, g, u, g, F);
  });
  // Down of every expert, straight into its positions of per_slot_, then weighted in place.
  for (size_t i = 0; i < n; ++i) {
    const int64_t p0 = start_[static_cast<size_t>(experts[i])];
    products_[i] = {weights[i].down, per_slot_.data() + p0 * D};
    groups_[i] = {std::span<const quant::Product>(products_.data() + i, 1), gate_.data() + p0 * F, groups_[i].n_tok,
                  n_tok_ > 1};
  }
  be_->matmul_groups(std::span<const quant::ProductGroup>(groups_.data(), n));
  over_slots(experts, D, [&](size_t i, int64_t p) {
    const float* bias = weights[i].down_bias;
    float* y = per_slot_.data() + p * D;
    if (!weigh_) {
      if (bias != nullptr) {
        for (int64_t j = 0; j < D; ++j) y[j] += bias[j];
      }
      return;
    }
    const float wt = weights_[static_cast<size_t>(slots_[static_cast<size_t>(p)])];
    if (rw_->expert_scale.empty()) {
      for (int64_t j = 0; j < D; ++j) y[j] = wt * (y[j] + (bias != nullptr ? bias[j] : 0.0f));
    } else {
      // Scaled first, then weighted, in the reference engine's order (down_exps_s, then the routing weight).
      const float se = rw_->expert_scale[static_cast<size_t>(experts[i])];
      for (int64_t j = 0; j < D; ++j) y[j] = (y[j] + (bias != nullptr ? bias[j] : 0.0f)) * se * wt;
    }
  });
}

}  // namespace moetier::model
