#include "model/delta_net.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "model/rmsnorm.h"
#include "quant/dot.h"
#include "util/thread_pool.h"

namespace moetier::model {

namespace {

using quant::dot8;

// y[n] += a * x[n]
void axpy(float* y, float a, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// ggml's softplus: the identity above 20, where log(1 + e^x) equals x in float.
float softplus(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }

// x / max(||x||, eps), the norm's square accumulated in double (ggml_l2_norm).
void l2_normalize(float* x, int64_t n, float eps, float extra_scale) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::max(std::sqrt(static_cast<float>(sum)), eps) * extra_scale;
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

}  // namespace

DeltaChunkScratch::DeltaChunkScratch(int64_t chunk, int64_t d_k, int64_t d_v)
    : chunk_(chunk),
      cum_(static_cast<size_t>(chunk)),
      lower_(static_cast<size_t>(chunk * chunk)),
      qk_(static_cast<size_t>(chunk * chunk)),
      u_(static_cast<size_t>(chunk * d_v)),
      w_(static_cast<size_t>(chunk * d_k)),
      kd_(static_cast<size_t>(chunk * d_k)) {}

void delta_rule_recurrent(const DeltaHead& h, int64_t n_tok, int64_t d_k, int64_t d_v, float* state) {
  for (int64_t t = 0; t < n_tok; ++t) {
    const float* q = h.q + t * h.qkv_stride;
    const float* k = h.k + t * h.qkv_stride;
    const float* v = h.v + t * h.qkv_stride;
    const float decay = std::exp(h.g[t * h.gb_stride]);
    const float beta = h.beta[t * h.gb_stride];
    float* o = h.out + t * h.out_stride;
    for (int64_t i = 0; i < d_v; ++i) {
      float* s = state + i * d_k;
      for (int64_t j = 0; j < d_k; ++j) s[j] *= decay;
      const float d = (v[i] - dot8(s, k, d_k)) * beta;  // the error of the state's prediction of v, times beta
      axpy(s, d, k, d_k);
      o[i] = dot8(s, q, d_k);
    }
  }
}

void delta_rule_chunked(const DeltaHead& h, int64_t n_tok, int64_t d_k, int64_t d_v, float* state,
                        DeltaChunkScratch& s) {
  const int64_t C = s.chunk_;
  assert(C > 0);
  float* G = s.cum_.data();
  float* L = s.lower_.data();
  float* QK = s.qk_.data();
  float* U = s.u_.data();
  float* W = s.w_.data();
  float* KD = s.kd_.data();
  for (int64_t t0 = 0; t0 < n_tok; t0 += C) {
    const int64_t c = std::min(C, n_tok - t0);
    const auto q = [&](int64_t r) { return h.q + (t0 + r) * h.qkv_stride; };
    const auto k = [&](int64_t r) { return h.k + (t0 + r) * h.qkv_stride; };
    const auto v = [&](int64_t r) { return h.v + (t0 + r) * h.qkv_stride; };
    const auto beta = [&](int64_t r) { return h.beta[(t0 + r) * h.gb_stride]; };
    float acc = 0.0f;
    for (int64_t r = 0; r < c; ++r) G[r] = acc += h.g[(t0 + r) * h.gb_stride];
    // L, the key-key interactions inside the chunk, and the query-key scores, both decayed from s to r.
    for (int64_t r = 0; r < c; ++r) {
      for (int64_t t = 0; t <= r; ++t) {
        const float decay = std::exp(G[r] - G[t]);
        if (t < r) L[r * C + t] = beta(r) * dot8(k(r), k(t), d_k) * decay;
        QK[r * C + t] = dot8(q(r), k(t), d_k) * decay;
      }
    }
    // U = (I + L)^-1 (beta v) and W = (I + L)^-1 (beta e^G k) by forward substitution.
    for (int64_t r = 0; r < c; ++r) {
      float* u = U + r * d_v;
      float* w = W + r * d_k;
      const float b = beta(r), eg = std::exp(G[r]);
      for (int64_t i = 0; i < d_v; ++i) u[i] = b * v(r)[i];
      for (int64_t j = 0; j < d_k; ++j) w[j] = b * eg * k(r)[j];
      for (int64_t t = 0; t < r; ++t) {
        axpy(u, -L[r * C + t], U + t * d_v, d_v);
        axpy(w, -L[r * C + t], W + t * d_k, d_k);
      }
    }
    // The new values V' = U - W S^T (U's rows are overwritten by them) and the outputs' part from the state
    // before the chunk, e^(G_r) S q_r, both against the state the chunk starts from.
    for (int64_t r = 0; r < c; ++r) {
      float* u = U + r * d_v;
      float* o = h.out + (t0 + r) * h.out_stride;
      const float* w = W + r * d_k;
      const float eg = std::exp(G[r]);
      for (int64_t i = 0; i < d_v; ++i) {
        const float* srow = state + i * d_k;
        u[i] -= dot8(w, srow, d_k);
        o[i] = eg * dot8(q(r), srow, d_k);
      }
    }
    // The outputs' part from inside the chunk: sum_{t <= r} QK_rt V'_t.
    for (int64_t r = 0; r < c; ++r) {
      float* o = h.out + (t0 + r) * h.out_stride;
      for (int64_t t = 0; t <= r; ++t) axpy(o, QK[r * C + t], U + t * d_v, d_v);
    }
    // The state at the chunk's end: S <- e^(G_last) S + sum_r V'_r (e^(G_last - G_r) k_r)^T.
    const float glast = G[c - 1];
    for (int64_t r = 0; r < c; ++r) {
      const float e = std::exp(glast - G[r]);
      for (int64_t j = 0; j < d_k; ++j) KD[r * d_k + j] = k(r)[j] * e;
    }
    const float elast = std::exp(glast);
    for (int64_t i = 0; i < d_v; ++i) {
      float* srow = state + i * d_k;
      for (int64_t j = 0; j < d_k; ++j) srow[j] *= elast;
      for (int64_t r = 0; r < c; ++r) axpy(srow, U[r * d_v + i], KD + r * d_k, d_k);
    }
  }
}

DeltaNet::DeltaNet(const DeltaNetConfig& cfg, int64_t max_tok)
    : cfg_(cfg),
      qkv_(static_cast<size_t>(max_tok * cfg.conv_dim())),
      conv_(static_cast<size_t>(max_tok * cfg.conv_dim())),
      z_(static_cast<size_t>(max_tok * cfg.value_dim())),
      beta_(static_cast<size_t>(max_tok * cfg.n_v_heads)),
      g_(static_cast<size_t>(max_tok * cfg.n_v_heads)),
      o_(static_cast<size_t>(max_tok * cfg.value_dim())) {
  const int64_t chunk = std::min(kChunk, max_tok);
  for (int64_t h = 0; h < cfg.n_v_heads; ++h) scratch_.emplace_back(chunk, cfg.head_k_dim, cfg.head_v_dim);
}

void DeltaNet::forward(const DeltaNetWeights& w, float* conv_state, float* ssm_state, const float* x, int64_t n_tok,
                       float* out, compute::Backend& be) {
  const int64_t nc = cfg_.conv_dim(), K = cfg_.conv_kernel, nv = cfg_.n_v_heads, nk = cfg_.n_k_heads;
  const int64_t dk = cfg_.head_k_dim, dv = cfg_.head_v_dim, vd = cfg_.value_dim();
  const quant::Product proj[] = {
      {w.qkv, qkv_.data()}, {w.gate, z_.data()}, {w.beta, beta_.data()}, {w.alpha, g_.data()}};
  be.matmul_shared_x(proj, x, n_tok);

  // Causal convolution over [window (K - 1 rows); this call's rows], each channel's taps summed oldest first in
  // float (ggml_ssm_conv), then SiLU.
  const auto input = [&](int64_t i) { return i < K - 1 ? conv_state + i * nc : qkv_.data() + (i - (K - 1)) * nc; };
  for (int64_t t = 0; t < n_tok; ++t) {
    float* y = conv_.data() + t * nc;
    for (int64_t ch = 0; ch < nc; ++ch) {
      const float* tap = w.conv.data() + ch * K;
      float sum = 0.0f;
      for (int64_t j = 0; j < K; ++j) sum += input(t + j)[ch] * tap[j];
      y[ch] = silu(sum);
    }
  }
  // The window for the next call: the last K - 1 inputs. Row i reads input n_tok + i >= i + 1, which is not yet
  // overwritten when the rows are written in ascending order.
  for (int64_t i = 0; i < K - 1; ++i) std::copy_n(input(n_tok + i), nc, conv_state + i * nc);

  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  for (int64_t t = 0; t < n_tok; ++t) {
    float* row = conv_.data() + t * nc;
    for (int64_t hk = 0; hk < nk; ++hk) {
      l2_normalize(row + hk * dk, dk, cfg_.norm_eps, q_scale);                // q
      l2_normalize(row + cfg_.key_dim() + hk * dk, dk, cfg_.norm_eps, 1.0f);  // k
    }
    for (int64_t h = 0; h < nv; ++h) {
      beta_[static_cast<size_t>(t * nv + h)] = sigmoid(beta_[static_cast<size_t>(t * nv + h)]);
      float& g = g_[static_cast<size_t>(t * nv + h)];
      g = softplus(g + w.dt_bias[static_cast<size_t>(h)]) * w.a[static_cast<size_t>(h)];
    }
  }

  const auto head = [&](int64_t h) {
    const int64_t hk = h % nk;  // the reference tiles the key heads over the value heads
    DeltaHead io;
    io.q = conv_.data() + hk * dk;
    io.k = conv_.data() + cfg_.key_dim() + hk * dk;
    io.v = conv_.data() + 2 * cfg_.key_dim() + h * dv;
    io.qkv_stride = nc;
    io.g = g_.data() + h;
    io.beta = beta_.data() + h;
    io.gb_stride = nv;
    io.out = o_.data() + h * dv;
    io.out_stride = vd;
    float* s = ssm_state + h * dv * dk;
    if (n_tok == 1) {
      delta_rule_recurrent(io, n_tok, dk, dv, s);
    } else {
      delta_rule_chunked(io, n_tok, dk, dv, s, scratch_[static_cast<size_t>(h)]);
    }
  };
  util::ThreadPool* pool = be.host_pool();
  if (pool == nullptr || pool->size() == 1) {
    for (int64_t h = 0; h < nv; ++h) head(h);
  } else {
    const int n = pool->size();
    pool->run([&](int i) {
      for (int64_t h = nv * i / n; h < nv * (i + 1) / n; ++h) head(h);
    });
  }

  // Gated RMSNorm per head, then the output projection.
  rms_norm(o_.data(), w.norm.data(), o_.data(), n_tok * nv, dv, cfg_.norm_eps);
  for (int64_t i = 0; i < n_tok * vd; ++i) o_[static_cast<size_t>(i)] *= silu(z_[static_cast<size_t>(i)]);
  be.matmul(w.out, o_.data(), out, n_tok);
}

}  // namespace moetier::model
