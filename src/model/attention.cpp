#include "model/attention.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

#include "model/rmsnorm.h"
#include "quant/kernels/vec_kernels.h"
#include "util/thread_pool.h"

namespace moetier::model {

Attention::Attention(const AttentionConfig& cfg, int64_t max_tok, int64_t n_ctx, int n_threads)
    : cfg_(cfg),
      rope_(cfg.rope),
      q_(static_cast<size_t>(max_tok * cfg.n_head * cfg.head_dim)),
      k_(static_cast<size_t>(max_tok * cfg.n_head_kv * cfg.head_dim)),
      v_(static_cast<size_t>(max_tok * cfg.n_head_kv * cfg.head_dim)),
      ctx_(static_cast<size_t>(max_tok * cfg.n_head * cfg.head_dim)),
      ones_(cfg.v_norm ? static_cast<size_t>(cfg.head_dim) : 0, 1.0f),
      qg_(cfg.output_gate ? static_cast<size_t>(max_tok * 2 * cfg.n_head * cfg.head_dim) : 0),
      gate_(cfg.output_gate ? static_cast<size_t>(max_tok * cfg.n_head * cfg.head_dim) : 0),
      n_ctx_(n_ctx),
      n_threads_(n_threads),
      scores_(static_cast<size_t>(n_ctx * (cfg.n_head / cfg.n_head_kv) * n_threads)) {}

namespace {

void add_bias(float* y, const std::vector<float>& b, int64_t n_tok, int64_t n) {
  if (b.empty()) return;
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t i = 0; i < n; ++i) y[t * n + i] += b[static_cast<size_t>(i)];
  }
}

}  // namespace

void Attention::forward(const AttentionWeights& w, KvCache& cache, int64_t layer, const float* x, int64_t pos0,
                        int64_t n_tok, float* out, compute::Backend& be) {
  const int64_t hd = cfg_.head_dim, nh = cfg_.n_head, nkv = cfg_.n_head_kv;
  const int64_t nq = nh * hd, nk = nkv * hd;
  float* q = q_.data();
  float* k = k_.data();
  float* v = v_.data();
  const quant::Product qkv[] = {{w.wq, cfg_.output_gate ? qg_.data() : q}, {w.wk, k}, {w.wv, v}};
  const bool v_is_k = w.wv.empty();
  be.matmul_shared_x(std::span<const quant::Product>(qkv, v_is_k ? 2 : 3), x, n_tok);
  if (v_is_k) std::copy_n(k, n_tok * nk, v);
  if (cfg_.output_gate) {  // per head: the query's hd rows, then the gate's
    for (int64_t t = 0; t < n_tok; ++t) {
      for (int64_t h = 0; h < nh; ++h) {
        const float* src = qg_.data() + t * 2 * nq + h * 2 * hd;
        std::copy_n(src, hd, q + t * nq + h * hd);
        std::copy_n(src + hd, hd, gate_.data() + t * nq + h * hd);
      }
    }
  }
  add_bias(q, w.bq, n_tok, nq);
  add_bias(k, w.bk, n_tok, nk);
  add_bias(v, w.bv, n_tok, nk);
  if (!w.q_norm.empty()) rms_norm(q, w.q_norm.data(), q, n_tok * nh, hd, cfg_.norm_eps);
  if (!w.k_norm.empty()) rms_norm(k, w.k_norm.data(), k, n_tok * nkv, hd, cfg_.norm_eps);
  if (cfg_.v_norm) rms_norm(v, ones_.data(), v, n_tok * nkv, hd, cfg_.norm_eps);
  for (int64_t t = 0; t < n_tok; ++t) {
    rope_.apply(q + t * nq, nh, hd, pos0 + t);
    rope_.apply(k + t * nk, nkv, hd, pos0 + t);
    cache.store(layer, pos0 + t, k + t * nk, v + t * nk);
  }

  const float scale = cfg_.scale != 0.0f ? cfg_.scale : 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t group = nh / nkv;
  util::ThreadPool* pool = be.host_pool();
  const int n_threads = pool != nullptr ? std::min(pool->size(), n_threads_) : 1;
  // A task: one token's query heads h0 .. h0 + sub - 1, which share a KV head: their scores over the visible
  // keys, each head's softmax, and the weighted sums of the values into their own slices of ctx_. Each cached
  // row is read once for the task's heads (KvCache::scores / values). A task holds a whole KV head's group
  // unless there would be fewer tasks than threads (decode: one token), then halves of it, and so on.
  int64_t split = 1;
  while (n_tok * nkv * split < n_threads && group % (2 * split) == 0) split *= 2;
  const int64_t sub = group / split;
  const auto task = [&](int64_t t, int64_t h0, float* scores) {
    const int64_t p = pos0 + t;
    const int64_t first = w.sliding_window > 0 ? std::max<int64_t>(0, p - w.sliding_window + 1) : 0;
    const int64_t koff = (h0 / group) * hd;
    cache.scores(layer, koff, q + t * nq + h0 * hd, sub, hd, first, p + 1, scale, scores, n_ctx_);
    // Each head's softmax over the visible keys and, when present, its sink logit (which has no value row).
    for (int64_t g = 0; g < sub; ++g) {
      const float sink =
          w.sinks.empty() ? -std::numeric_limits<float>::infinity() : w.sinks[static_cast<size_t>(h0 + g)];
      quant::kernels::attn_softmax(scores + g * n_ctx_ + first, p + 1 - first, sink);
    }
    cache.values(layer, koff, scores, sub, n_ctx_, first, p + 1, hd, ctx_.data() + t * nq + h0 * hd);
  };
  const int64_t n_tasks = n_tok * nkv * split, per_token = nkv * split;
  // Thread i takes every n_threads-th task: a causal prompt's later tokens see more keys, so contiguous ranges
  // left the first thread the cheap half (a quarter of the work at two threads) and it waited for the other.
  const auto range = [&](int i) {
    float* scores = scores_.data() + static_cast<int64_t>(i) * group * n_ctx_;
    for (int64_t tk = i; tk < n_tasks; tk += n_threads) task(tk / per_token, (tk % per_token) * sub, scores);
  };
  if (n_threads == 1) {
    range(0);
  } else {
    pool->run([&](int i) {
      if (i < n_threads) range(i);
    });
  }
  if (cfg_.output_gate) {
    float* c = ctx_.data();
    const float* g = gate_.data();
    for (int64_t i = 0; i < n_tok * nq; ++i) c[i] *= 1.0f / (1.0f + std::exp(-g[i]));
  }
  be.matmul(w.wo, ctx_.data(), out, n_tok);
  add_bias(out, w.bo, n_tok, cfg_.n_embd);
}

}  // namespace moetier::model
