#include "model/delta_net.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "model/rmsnorm.h"
#include "quant/dot.h"
#include "quant/kernels/vec_kernels.h"
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

// e^x for the chunked form's decays, 0 below e^-64 (~1.6e-28). A chunk's cumulative log-decay reaches -100 and
// beyond where each token decays strongly, and those factors, multiplied into keys and values, made subnormal
// floats, which the CPU computes by microcode assists: a 128-token chunked call at d_k = d_v = 128 took 2.9 ms at a
// log-decay of -3 a token against 0.59 ms at -1, the same operations. A term so decayed is below float's precision
// against the chunk's undecayed ones (its own token's), so the flush stays within the form's rounding.
float chunk_decay(float x) {
  constexpr float kMinLogDecay = -64.0f;
  return x < kMinLogDecay ? 0.0f : std::exp(x);
}

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
      kt_(static_cast<size_t>(d_k * chunk)),
      lower_(static_cast<size_t>(chunk * chunk)),
      qk_(static_cast<size_t>(chunk * chunk)),
      uw_(static_cast<size_t>(chunk * (d_v + d_k))),
      st_(static_cast<size_t>(d_k * d_v)),
      ut_(static_cast<size_t>(d_v * chunk)),
      kd_(static_cast<size_t>(chunk * d_k)),
      sum_(static_cast<size_t>(std::max({chunk * d_v, d_v + d_k, d_v * d_k}))) {}

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
  using quant::kernels::attn_values_f32;  // o[g, :] = sum_j p[g, j] * rows[j, :]
  const int64_t uw = d_v + d_k;  // a row of s.uw_
  float* G = s.cum_.data();
  float* KT = s.kt_.data();
  float* L = s.lower_.data();
  float* QK = s.qk_.data();
  float* UW = s.uw_.data();
  float* ST = s.st_.data();
  float* UT = s.ut_.data();
  float* KD = s.kd_.data();
  float* T = s.sum_.data();
  for (int64_t t0 = 0; t0 < n_tok; t0 += C) {
    const int64_t c = std::min(C, n_tok - t0);
    const float* q0 = h.q + t0 * h.qkv_stride;
    const float* k0 = h.k + t0 * h.qkv_stride;
    const auto k = [&](int64_t r) { return k0 + r * h.qkv_stride; };
    const auto v = [&](int64_t r) { return h.v + (t0 + r) * h.qkv_stride; };
    const auto beta = [&](int64_t r) { return h.beta[(t0 + r) * h.gb_stride]; };
    const auto out = [&](int64_t r) { return h.out + (t0 + r) * h.out_stride; };
    float acc = 0.0f;
    bool decaying = true;  // G never rises (every g <= 0: ssm_a < 0, as -exp(A_log) is)
    for (int64_t r = 0; r < c; ++r) {
      const float g = h.g[(t0 + r) * h.gb_stride];
      decaying = decaying && g <= 0.0f;
      G[r] = acc += g;
    }
    // The flush is within rounding only while G never rises (chunk_decay); a chunk where it does (no real model's:
    // g = softplus(..) * -exp(A_log)) takes every decay unflushed.
    const auto decay_of = [decaying](float x) { return decaying ? chunk_decay(x) : std::exp(x); };
    // The query-key scores and the key-key interactions inside the chunk, [c, c] each, as sums over the keys'
    // transposed rows; then decayed from s to r and masked to the lower triangle.
    for (int64_t r = 0; r < c; ++r) {
      for (int64_t j = 0; j < d_k; ++j) KT[j * c + r] = k(r)[j];
    }
    attn_values_f32(q0, c, h.qkv_stride, KT, c, 0, d_k, c, QK);
    attn_values_f32(k0, c, h.qkv_stride, KT, c, 0, d_k, c, L);
    for (int64_t r = 0; r < c; ++r) {
      for (int64_t t = 0; t < c; ++t) {
        const float decay = t <= r ? decay_of(G[r] - G[t]) : 0.0f;
        L[r * c + t] = t < r ? beta(r) * L[r * c + t] * decay : 0.0f;
        QK[r * c + t] *= decay;
      }
    }
    // [U | W] = (I + L)^-1 [beta v | beta e^G k] by forward substitution: row r less L's row r times the rows
    // before it.
    for (int64_t r = 0; r < c; ++r) {
      float* u = UW + r * uw;
      float* w = u + d_v;
      const float b = beta(r), eg = decay_of(G[r]);
      // W's row r is e^(G_r) times a combination of keys (L = e^G L' e^-G for L' undecayed): with e^(G_r) flushed
      // the whole row is, or its sum of products of two kept decays would make subnormals. Its share in a later
      // row t carries e^(G_t), as small or smaller only while G never rises.
      const bool w_flushed = decaying && eg == 0.0f;
      attn_values_f32(L + r * c, 1, c, UW, uw, 0, r, w_flushed ? d_v : uw, T);
      for (int64_t i = 0; i < d_v; ++i) u[i] = b * v(r)[i] - T[i];
      for (int64_t j = 0; j < d_k; ++j) w[j] = w_flushed ? 0.0f : b * eg * k(r)[j] - T[d_v + j];
    }
    // Against the state the chunk starts from (transposed: its rows indexed by the key dimension): the new values
    // V' = U - W S^T, and the outputs' part e^(G_r) S q_r.
    for (int64_t i = 0; i < d_v; ++i) {
      for (int64_t j = 0; j < d_k; ++j) ST[j * d_v + i] = state[i * d_k + j];
    }
    attn_values_f32(UW + d_v, c, uw, ST, d_v, 0, d_k, d_v, T);
    for (int64_t r = 0; r < c; ++r) {
      for (int64_t i = 0; i < d_v; ++i) UW[r * uw + i] -= T[r * d_v + i];
    }
    attn_values_f32(q0, c, h.qkv_stride, ST, d_v, 0, d_k, d_v, T);
    for (int64_t r = 0; r < c; ++r) {
      const float eg = decay_of(G[r]);
      for (int64_t i = 0; i < d_v; ++i) out(r)[i] = eg * T[r * d_v + i];
    }
    // The outputs' part from inside the chunk: sum_{t <= r} QK_rt V'_t (QK is 0 above the diagonal).
    attn_values_f32(QK, c, c, UW, uw, 0, c, d_v, T);
    for (int64_t r = 0; r < c; ++r) {
      for (int64_t i = 0; i < d_v; ++i) out(r)[i] += T[r * d_v + i];
    }
    // The state at the chunk's end: S <- e^(G_last) S + sum_r V'_r (e^(G_last - G_r) k_r)^T, row i of the sum
    // weighting the decayed keys by V'^T's row i.
    const float glast = G[c - 1];
    for (int64_t r = 0; r < c; ++r) {
      const float e = decay_of(glast - G[r]);
      for (int64_t j = 0; j < d_k; ++j) KD[r * d_k + j] = k(r)[j] * e;
      for (int64_t i = 0; i < d_v; ++i) UT[i * c + r] = UW[r * uw + i];
    }
    attn_values_f32(UT, d_v, c, KD, d_k, 0, c, d_k, T);
    const float elast = decay_of(glast);
    for (int64_t e = 0; e < d_v * d_k; ++e) state[e] = elast * state[e] + T[e];
  }
}

DeltaNet::DeltaNet(const DeltaNetConfig& cfg, int64_t max_tok, int threads)
    : cfg_(cfg),
      qkv_(static_cast<size_t>(max_tok * cfg.conv_dim())),
      conv_(static_cast<size_t>(max_tok * cfg.conv_dim())),
      z_(static_cast<size_t>(max_tok * cfg.value_dim())),
      beta_(static_cast<size_t>(max_tok * cfg.n_v_heads)),
      g_(static_cast<size_t>(max_tok * cfg.n_v_heads)),
      o_(static_cast<size_t>(max_tok * cfg.value_dim())) {
  const int64_t chunk = std::min(kChunk, max_tok);
  for (int i = 0; i < std::max(threads, 1); ++i) scratch_.emplace_back(chunk, cfg.head_k_dim, cfg.head_v_dim);
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

  const auto head = [&](int64_t h, DeltaChunkScratch& scratch) {
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
      delta_rule_chunked(io, n_tok, dk, dv, s, scratch);
    }
  };
  util::ThreadPool* pool = be.host_pool();
  if (pool == nullptr || pool->size() == 1) {
    for (int64_t h = 0; h < nv; ++h) head(h, scratch_[0]);
  } else {
    // As many shares as scratches (a pool larger than the model's thread count leaves the rest idle).
    const int n = std::min(pool->size(), static_cast<int>(scratch_.size()));
    pool->run([&](int i) {
      if (i >= n) return;
      for (int64_t h = nv * i / n; h < nv * (i + 1) / n; ++h) head(h, scratch_[static_cast<size_t>(i)]);
    });
  }

  // Gated RMSNorm per head, then the output projection.
  rms_norm(o_.data(), w.norm.data(), o_.data(), n_tok * nv, dv, cfg_.norm_eps);
  for (int64_t i = 0; i < n_tok * vd; ++i) o_[static_cast<size_t>(i)] *= silu(z_[static_cast<size_t>(i)]);
  be.matmul(w.out, o_.data(), out, n_tok);
}

}  // namespace moetier::model
