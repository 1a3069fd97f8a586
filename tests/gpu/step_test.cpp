// The device-resident step (gpu/step.h, gpu/vulkan/vulkan_step.cpp) kernel by kernel against the scalar
// references: RMSNorm (model::rms_norm), RoPE (model::Rope::apply, normal and neox, partial rotation, YaRN,
// frequency factors), the KV store and attention (a double-precision softmax(scale q.k) v over the binary16 cache
// with GQA, sinks and a sliding window), the GLUs (model::glu), residual adds, the activation rounding
// (quant::round_activations_like_ggml, bit for bit), the gather and combine of a MoE layer, the weight products
// (quant::matmul_reference), one chain of ops in one submission, and the errors of setup and recording; on the first
// Vulkan device under the validation layer.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/gpu_test_support.h"
#include "gpu/step.h"
#include "gpu/vulkan/upload_ring.h"
#include "model/glu.h"
#include "model/rmsnorm.h"
#include "model/rope.h"
#include "quant/fp16.h"
#include "quant/ggml_type.h"
#include "quant/matmul.h"
#include "quant/quantize_ref.h"
#include "util/error.h"

namespace moetier::gpu {
namespace {

using quant::GgmlType;

std::vector<float> normal(int64_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// A backend whose step is used by one test; its product buffers are sized for the tests' small weights.
std::unique_ptr<GpuBackend> backend(quant::ActivationRounding rounding = quant::ActivationRounding::exact) {
  return testing::validated_backend(4096, 256, 16, 0, rounding);
}

// --- RMSNorm ---

TEST(GpuStepRmsNorm, MatchesTheReferenceWithAndWithoutGainInAndOutOfPlace) {
  struct Case {
    int64_t rows, n;
    bool gain, in_place;
    std::vector<float> x, w;
    DevArray dx, dw, dy;
  };
  std::vector<Case> cases;
  uint32_t seed = 1;
  for (const auto [rows, n] : {std::pair<int64_t, int64_t>{1, 7}, {3, 64}, {5, 100}, {2, 4099}, {70, 33}}) {
    for (const bool gain : {true, false}) {
      for (const bool in_place : {false, true}) {
        Case c{
            rows, n, gain, in_place, normal(rows * n, seed++, 3.0f), gain ? normal(n, seed++) : std::vector<float>{}};
        cases.push_back(std::move(c));
      }
    }
  }
  auto be = backend();
  DeviceStep& st = be->step();
  for (Case& c : cases) {
    c.dx = st.alloc(c.rows * c.n);
    c.dy = c.in_place ? c.dx : st.alloc(c.rows * c.n);
    if (c.gain) c.dw = st.constant(c.w);
  }
  st.finish_setup();
  std::vector<std::vector<float>> got(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    got[i].assign(c.x.size(), NAN);
    st.upload(c.x.data(), c.dx);
    st.rms_norm(c.dx, c.dw, c.dy, c.rows, c.n, 1e-6f);
    st.download(c.dy, got[i].data());
  }
  st.submit();
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const std::vector<float> ones(static_cast<size_t>(c.n), 1.0f);
    std::vector<float> ref(c.x.size());
    model::rms_norm(c.x.data(), c.gain ? c.w.data() : ones.data(), ref.data(), c.rows, c.n, 1e-6f);
    int bad = 0;
    for (size_t j = 0; j < ref.size(); ++j) {
      if (!(std::fabs(got[i][j] - ref[j]) <= 1e-5f * std::fabs(ref[j])) && ++bad <= 3) {
        ADD_FAILURE() << "rows " << c.rows << " n " << c.n << (c.gain ? " gain" : " no gain")
                      << (c.in_place ? " in place" : "") << " element " << j << ": gpu " << got[i][j] << " reference "
                      << ref[j];
      }
    }
  }
  EXPECT_EQ(be->validation_errors(), 0u);
}

// --- RoPE ---

TEST(GpuStepRope, RotatesByTheTableAsRopeApplyDoes) {
  struct Case {
    const char* what;
    model::RopeConfig cfg;
    int64_t head_dim;
  };
  std::vector<Case> cases;
  {
    model::RopeConfig c;
    c.n_rot = 64;
    cases.push_back({"normal", c, 64});
    c.style = model::RopeStyle::neox;
    cases.push_back({"neox", c, 64});
    c.n_rot = 32;
    cases.push_back({"neox partial", c, 80});
    c.style = model::RopeStyle::normal;
    cases.push_back({"normal partial", c, 80});
  }
  {
    model::RopeConfig c;  // gpt-oss
    c.style = model::RopeStyle::neox;
    c.n_rot = 64;
    c.freq_base = 150000.0f;
    c.yarn_factor = 32.0f;
    c.yarn_n_ctx_orig = 4096;
    cases.push_back({"yarn", c, 64});
  }
  {
    model::RopeConfig c;
    c.n_rot = 128;
    c.freq_base = 500000.0f;
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> f(1.0f, 8.0f);
    for (int i = 0; i < 64; ++i) c.freq_factors.push_back(f(rng));
    c.freq_factors[60] = 1e30f;
    cases.push_back({"freq_factors", c, 128});
  }
  constexpr int64_t kTok = 5, kHeads = 3;
  for (const int64_t pos0 : {int64_t{0}, int64_t{1021}}) {
    auto be = backend();
    DeviceStep& st = be->step();
    std::vector<DevArray> dx, dt;
    for (const Case& c : cases) {
      dx.push_back(st.alloc(kTok * kHeads * c.head_dim));
      dt.push_back(st.alloc(kTok * c.cfg.n_rot));
    }
    st.finish_setup();
    std::vector<std::vector<float>> x, table, got;
    for (size_t i = 0; i < cases.size(); ++i) {
      const model::Rope rope(cases[i].cfg);
      x.push_back(normal(kTok * kHeads * cases[i].head_dim, static_cast<uint32_t>(10 + i)));
      table.emplace_back(static_cast<size_t>(kTok * cases[i].cfg.n_rot));
      for (int64_t t = 0; t < kTok; ++t) rope.table(pos0 + t, table[i].data() + t * cases[i].cfg.n_rot);
      got.emplace_back(x[i].size(), NAN);
    }
    for (size_t i = 0; i < cases.size(); ++i) {
      st.upload(x[i].data(), dx[i]);
      st.upload(table[i].data(), dt[i]);
      st.rope(dx[i], dt[i], kTok, kHeads, cases[i].head_dim, cases[i].cfg.n_rot,
              cases[i].cfg.style == model::RopeStyle::neox);
      st.download(dx[i], got[i].data());
    }
    st.submit();
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      const model::Rope rope(c.cfg);
      std::vector<float> ref = x[i];
      for (int64_t t = 0; t < kTok; ++t) rope.apply(ref.data() + t * kHeads * c.head_dim, kHeads, c.head_dim, pos0 + t);
      int bad = 0;
      for (size_t j = 0; j < ref.size(); ++j) {
        const int64_t d = static_cast<int64_t>(j) % c.head_dim;
        const int64_t half = c.cfg.n_rot / 2;
        const int64_t partner = c.cfg.style == model::RopeStyle::normal ? (d ^ 1) : d < half ? d + half : d - half;
        const float in =
            std::fabs(x[i][j]) + std::fabs(x[i][j - static_cast<size_t>(d) + static_cast<size_t>(partner)]);
        // Beyond n_rot: unchanged. Rotated: the same (cos, sin), so a rounding or two of the inputs' size.
        const bool ok = d >= c.cfg.n_rot ? got[i][j] == x[i][j]
                                         : std::fabs(got[i][j] - ref[j]) <= 1e-6f * (std::fabs(ref[j]) + in) + 1e-30f;
        if (!ok && ++bad <= 3) {
          ADD_FAILURE() << c.what << " pos0 " << pos0 << " element " << j << " (dim " << d << "): gpu " << got[i][j]
                        << " reference " << ref[j] << " input " << x[i][j];
        }
      }
    }
    EXPECT_EQ(be->validation_errors(), 0u);
  }
}

// --- KV store and attention ---

struct AttnCase {
  int64_t n_head, n_head_kv, head_dim, window;
  bool sinks;
  int64_t n_ctx;
  std::vector<std::pair<int64_t, int64_t>> stores;  // (pos0, n_tok) of each kv_store + attention, in order
};

std::string describe(const AttnCase& c) {
  return "n_head " + std::to_string(c.n_head) + "/" + std::to_string(c.n_head_kv) + " head_dim " +
         std::to_string(c.head_dim) + " window " + std::to_string(c.window) + (c.sinks ? " sinks" : "");
}

float fp16_round(float v) { return quant::fp16_to_fp32(quant::fp32_to_fp16(v)); }

TEST(GpuStepAttention, MatchesSoftmaxOverTheBinary16CacheWithGqaSinksAndWindow) {
  const std::vector<AttnCase> cases = {
      {8, 2, 64, 0, false, 16, {{0, 7}, {7, 1}}},
      {8, 2, 64, 0, true, 16, {{0, 7}, {7, 1}, {8, 1}}},
      {8, 2, 128, 5, false, 16, {{0, 7}, {7, 1}}},
      {8, 2, 128, 5, true, 16, {{0, 7}, {7, 1}}},
      {8, 2, 256, 0, true, 160, {{0, 7}, {7, 136}, {143, 7}, {150, 1}}},  // 151 keys: three chunks of 64
      {8, 2, 256, 5, false, 160, {{0, 143}, {143, 7}, {150, 1}}},
      {8, 2, 64, 70, true, 160, {{0, 143}, {143, 7}, {150, 1}}},  // a window over two chunks, not 64-aligned
      {4, 4, 80, 0, false, 160, {{0, 100}, {100, 1}}},            // head_dim not a multiple of 64
      {6, 1, 64, 0, true, 8, {{0, 1}, {1, 1}, {2, 1}}},
  };
  auto be = backend();
  DeviceStep& st = be->step();
  struct Dev {
    int kv;
    DevArray q, k, v, out, sinks;
  };
  std::vector<Dev> dev;
  std::vector<std::vector<float>> sinks(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const AttnCase& c = cases[i];
    int64_t most = 0;
    for (const auto& s : c.stores) most = std::max(most, s.second);
    Dev d;
    d.kv = st.kv_cache(c.n_ctx, c.n_head_kv * c.head_dim);
    d.q = st.alloc(most * c.n_head * c.head_dim);
    d.out = st.alloc(most * c.n_head * c.head_dim);
    d.k = st.alloc(most * c.n_head_kv * c.head_dim);
    d.v = st.alloc(most * c.n_head_kv * c.head_dim);
    if (c.sinks) {
      sinks[i] = normal(c.n_head, static_cast<uint32_t>(100 + i), 2.0f);
      d.sinks = st.constant(sinks[i]);
    }
    dev.push_back(d);
  }
  st.finish_setup();
  for (size_t i = 0; i < cases.size(); ++i) {
    const AttnCase& c = cases[i];
    const Dev& d = dev[i];
    const int64_t n_kv = c.n_head_kv * c.head_dim, n_q = c.n_head * c.head_dim;
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
    std::vector<float> kc(static_cast<size_t>(c.n_ctx * n_kv)), vc(kc.size());  // the cache as binary16 holds it
    uint32_t seed = static_cast<uint32_t>(1000 * i);
    for (size_t si = 0; si < c.stores.size(); ++si) {
      const auto [pos0, n_tok] = c.stores[si];
      const auto q = normal(n_tok * n_q, ++seed), k = normal(n_tok * n_kv, ++seed), v = normal(n_tok * n_kv, ++seed);
      for (int64_t e = 0; e < n_tok * n_kv; ++e) {
        kc[static_cast<size_t>(pos0 * n_kv + e)] = fp16_round(k[static_cast<size_t>(e)]);
        vc[static_cast<size_t>(pos0 * n_kv + e)] = fp16_round(v[static_cast<size_t>(e)]);
      }
      std::vector<float> got(q.size(), NAN);
      st.upload(q.data(), d.q.sub(0, n_tok * n_q));
      st.upload(k.data(), d.k.sub(0, n_tok * n_kv));
      st.upload(v.data(), d.v.sub(0, n_tok * n_kv));
      st.kv_store(d.kv, d.k, d.v, pos0, n_tok);
      AttentionOp op;
      op.kv = d.kv;
      op.pos0 = pos0;
      op.n_tok = n_tok;
      op.n_head = c.n_head;
      op.n_head_kv = c.n_head_kv;
      op.head_dim = c.head_dim;
      op.scale = static_cast<float>(scale);
      op.window = c.window;
      op.sinks = d.sinks;
      st.attention(op, d.q, d.out);
      st.download(d.out.sub(0, n_tok * n_q), got.data());
      st.submit();
      int bad = 0;
      for (int64_t t = 0; t < n_tok; ++t) {
        const int64_t pos = pos0 + t;
        const int64_t first = c.window > 0 ? std::max<int64_t>(0, pos + 1 - c.window) : 0;
        for (int64_t h = 0; h < c.n_head; ++h) {
          const int64_t hk = h / (c.n_head / c.n_head_kv);
          const float* qh = q.data() + t * n_q + h * c.head_dim;
          std::vector<double> s;
          double m = c.sinks ? sinks[i][static_cast<size_t>(h)] : -INFINITY;
          for (int64_t j = first; j <= pos; ++j) {
            double dot = 0;
            for (int64_t e = 0; e < c.head_dim; ++e)
              dot += double{qh[e]} * kc[static_cast<size_t>(j * n_kv + hk * c.head_dim + e)];
            s.push_back(static_cast<double>(op.scale) * dot);
            m = std::max(m, s.back());
          }
          double l = c.sinks ? std::exp(sinks[i][static_cast<size_t>(h)] - m) : 0.0;
          for (double& x : s) l += (x = std::exp(x - m));
          for (int64_t e = 0; e < c.head_dim; ++e) {
            double o = 0, mag = 0;
            for (int64_t j = first; j <= pos; ++j) {
              const double pv =
                  s[static_cast<size_t>(j - first)] * vc[static_cast<size_t>(j * n_kv + hk * c.head_dim + e)];
              o += pv;
              mag += std::fabs(pv);
            }
            o /= l;
            mag /= l;
            const float g = got[static_cast<size_t>(t * n_q + h * c.head_dim + e)];
            if (!(std::fabs(g - o) <= 1e-4 * mag + 1e-7) && ++bad <= 3) {
              ADD_FAILURE() << describe(c) << " store " << si << " pos " << pos << " head " << h << " dim " << e
                            << ": gpu " << g << " reference " << o << " (sum |p v| " << mag << ")";
            }
          }
        }
      }
      EXPECT_EQ(bad, 0) << describe(c) << " store " << si;
    }
  }
  EXPECT_EQ(be->validation_errors(), 0u);
}

// --- GLU ---

TEST(GpuStepGlu, MatchesModelGluForEveryKind) {
  const std::pair<GluKind, model::GluConfig::Kind> kinds[] = {{GluKind::swiglu, model::GluConfig::Kind::swiglu},
                                                              {GluKind::swiglu_oai, model::GluConfig::Kind::swiglu_oai},
                                                              {GluKind::geglu, model::GluConfig::Kind::geglu}};
  const int64_t sizes[] = {1, 63, 65, 1000, 5000};
  // Values at and beyond the clamp of swiglu_oai (+-7) and where tanh saturates.
  const float special[] = {0.0f, -0.0f, 7.0f, -7.0f, 7.5f, -7.5f, 8.0f, -8.0f, 20.0f, -20.0f, 30.0f, -30.0f, 1e-4f};
  auto be = backend();
  DeviceStep& st = be->step();
  struct Case {
    GluKind kind;
    model::GluConfig cfg;
    int64_t n;
    bool in_place;
    std::vector<float> gate, up;
    DevArray dg, du, dh;
  };
  std::vector<Case> cases;
  uint32_t seed = 7;
  for (const auto& [kind, mkind] : kinds) {
    for (const int64_t n : sizes) {
      for (const bool in_place : {false, true}) {
        Case c{kind, {mkind, 1.702f, 7.0f}, n, in_place, normal(n, seed++, 5.0f), normal(n, seed++, 5.0f)};
        for (size_t j = 0; j < std::size(special) && static_cast<int64_t>(j) < n; ++j) {
          c.gate[j] = special[j];
          c.up[static_cast<size_t>(n) - 1 - j] = special[j];
        }
        c.dg = st.alloc(n);
        c.du = st.alloc(n);
        c.dh = in_place ? c.dg : st.alloc(n);
        cases.push_back(std::move(c));
      }
    }
  }
  st.finish_setup();
  std::vector<std::vector<float>> got;
  for (const Case& c : cases) {
    got.emplace_back(static_cast<size_t>(c.n), NAN);
    st.upload(c.gate.data(), c.dg);
    st.upload(c.up.data(), c.du);
    st.glu(c.kind, c.cfg.alpha, c.cfg.limit, c.dg, c.du, c.dh, c.n);
    st.download(c.dh, got.back().data());
  }
  st.submit();
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    std::vector<float> ref(static_cast<size_t>(c.n));
    model::glu(c.cfg, c.gate.data(), c.up.data(), ref.data(), c.n);
    int bad = 0;
    for (int64_t j = 0; j < c.n; ++j) {
      const float r = ref[static_cast<size_t>(j)], g = got[i][static_cast<size_t>(j)];
      // GEGLU's 1 + tanh cancels for negative gates: a few ulp of tanh near -1, scaled by 0.5 |gate up|.
      const float cancel = c.kind == GluKind::geglu
                               ? 1e-6f * std::fabs(c.gate[static_cast<size_t>(j)] * c.up[static_cast<size_t>(j)])
                               : 0.0f;
      if (!(std::fabs(g - r) <= 1e-5f * std::fabs(r) + cancel + 1e-30f) && ++bad <= 3) {
        ADD_FAILURE() << "kind " << static_cast<int>(c.kind) << " n " << c.n << (c.in_place ? " in place" : "")
                      << " element " << j << " gate " << c.gate[static_cast<size_t>(j)] << " up "
                      << c.up[static_cast<size_t>(j)] << ": gpu " << g << " reference " << r;
      }
    }
  }
  EXPECT_EQ(be->validation_errors(), 0u);
}

// --- add ---

TEST(GpuStepAdd, ElementwiseAndBroadcastAreExact) {
  auto be = backend();
  DeviceStep& st = be->step();
  struct Case {
    int64_t rows, n;
    bool broadcast;
    std::vector<float> y, a;
    DevArray dy, da;
  };
  std::vector<Case> cases;
  uint32_t seed = 3;
  for (const auto [rows, n] : {std::pair<int64_t, int64_t>{1, 1}, {3, 65}, {7, 1000}, {100, 129}}) {
    for (const bool broadcast : {false, true}) {
      Case c{rows, n, broadcast, normal(rows * n, seed++), normal(broadcast ? n : rows * n, seed++)};
      c.dy = st.alloc(rows * n);
      c.da = st.alloc(static_cast<int64_t>(c.a.size()));
      cases.push_back(std::move(c));
    }
  }
  st.finish_setup();
  std::vector<std::vector<float>> got;
  for (const Case& c : cases) {
    got.emplace_back(c.y.size(), NAN);
    st.upload(c.y.data(), c.dy);
    st.upload(c.a.data(), c.da);
    st.add(c.dy, c.da, c.rows, c.n, c.broadcast);
    st.download(c.dy, got.back().data());
  }
  st.submit();
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    int bad = 0;
    for (int64_t r = 0; r < c.rows; ++r) {
      for (int64_t j = 0; j < c.n; ++j) {
        const size_t e = static_cast<size_t>(r * c.n + j);
        const float ref = c.y[e] + c.a[c.broadcast ? static_cast<size_t>(j) : e];
        if (got[i][e] != ref && ++bad <= 3) {
          ADD_FAILURE() << "rows " << c.rows << " n " << c.n << (c.broadcast ? " broadcast" : "") << " element " << e
                        << ": gpu " << got[i][e] << " reference " << ref;
        }
      }
    }
  }
  EXPECT_EQ(be->validation_errors(), 0u);
}

// --- round_for ---

// Rows of activations with blocks the roundings treat specially: all zeros, ties of the 8-bit grids (a block whose
// scale is 1: amax 127, or max -127 for Q8_K), ties and subnormals of binary16 and bfloat16, values beyond
// binary16's range.
std::vector<float> rounding_input(int64_t rows, int64_t cols, uint32_t seed) {
  std::vector<float> x = normal(rows * cols, seed);
  std::mt19937 rng(seed + 1);
  std::uniform_real_distribution<float> mag(-6.0f, 6.0f);
  for (int64_t b = 0; b < rows * cols / 32; ++b) {  // a spread of block scales
    const float s = std::exp2(mag(rng));
    for (int64_t j = 0; j < 32; ++j) x[static_cast<size_t>(b * 32 + j)] *= s;
  }
  std::fill(x.begin(), x.begin() + 256, 0.0f);  // a zero block of either grid
  float* t = x.data() + 256;                    // a Q8_K block (and eight Q8_0 blocks) with scale 1
  for (int j = 0; j < 256; ++j) t[j] = static_cast<float>(j % 64 - 32) + 0.5f;
  for (int b = 0; b < 8; ++b) t[32 * b] = b % 2 == 0 ? 127.0f : -127.0f;
  t[0] = -127.0f;             // the Q8_K block's max: iscale 1
  float* u = x.data() + 512;  // max +127 for Q8_K: iscale -1, so -127 .. 127 ties at -x
  for (int j = 0; j < 256; ++j) u[j] = static_cast<float>(j % 50 - 25) - 0.5f;
  u[5] = 127.0f;
  float* h = x.data() + 768;  // binary16 and bfloat16 ties and small values
  const float fp[] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, -(1.0f + 0x1p-11f), 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f,
                      3e-5f, 6.1e-5f, 1e-7f, 2.98e-8f, -5.96e-8f,
                      65504.0f, 65519.0f, 65520.0f, 70000.0f, -1e6f,
                      1e-40f, 0x1p-25f, 3 * 0x1p-26f, 3.3895e38f, -0.0f};
  std::copy(std::begin(fp), std::end(fp), h);
  return x;
}

TEST(GpuStepRound, MatchesRoundActivationsLikeGgmlBitForBit) {
  const GgmlType types[] = {GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,   GgmlType::Q8_0, GgmlType::MXFP4,
                            GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::IQ4_XS, GgmlType::F32};
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1024}, {5, 4096}};  // 5 x 4096: 80 blocks of 256
  auto be = backend(quant::ActivationRounding::match_ggml);
  DeviceStep& st = be->step();
  std::vector<DevArray> dx, dd;
  for (size_t i = 0; i < std::size(types) * std::size(shapes); ++i) {
    const auto [rows, cols] = shapes[i % std::size(shapes)];
    dx.push_back(st.alloc(rows * cols));
    dd.push_back(st.alloc(rows * cols));
  }
  st.finish_setup();
  std::vector<std::vector<float>> x, got;
  for (size_t i = 0; i < dx.size(); ++i) {
    const GgmlType t = types[i / std::size(shapes)];
    const auto [rows, cols] = shapes[i % std::size(shapes)];
    x.push_back(rounding_input(rows, cols, static_cast<uint32_t>(20 + i)));
    got.emplace_back(x.back().size(), NAN);
    st.upload(x.back().data(), dx[i]);
    const DevArray r = st.round_for(t, dx[i], dd[i], rows, cols);
    if (t == GgmlType::F32) {
      EXPECT_EQ(r.offset, dx[i].offset) << "F32 needs no rounding";
    } else {
      EXPECT_EQ(r.offset, dd[i].offset) << quant::type_name(t);
      EXPECT_EQ(r.size, static_cast<uint32_t>(rows * cols));
    }
    st.download(r, got.back().data());
  }
  st.submit();
  for (size_t i = 0; i < dx.size(); ++i) {
    const GgmlType t = types[i / std::size(shapes)];
    const auto [rows, cols] = shapes[i % std::size(shapes)];
    std::vector<float> ref = x[i];
    for (int64_t r = 0; r < rows; ++r) quant::round_activations_like_ggml(t, ref.data() + r * cols, cols);
    int bad = 0;
    for (size_t j = 0; j < ref.size(); ++j) {
      if (std::bit_cast<uint32_t>(got[i][j]) != std::bit_cast<uint32_t>(ref[j]) && ++bad <= 5) {
        ADD_FAILURE() << quant::type_name(t) << " " << rows << "x" << cols << " element " << j << " input "
                      << std::hexfloat << x[i][j] << ": gpu " << got[i][j] << " reference " << ref[j]
                      << std::defaultfloat;
      }
    }
    EXPECT_EQ(bad, 0) << quant::type_name(t) << " " << rows << "x" << cols;
  }
  EXPECT_EQ(be->validation_errors(), 0u);
}

// The Q8_0 grid over a length that is not a multiple of 256 (the kernel's workgroup takes 256 elements: the last
// one is partial), rounded in place.
TEST(GpuStepRound, Q8_0GridOfAPartialWorkgroupInPlace) {
  constexpr int64_t kRows = 3, kCols = 96;
  auto be = backend(quant::ActivationRounding::match_ggml);
  DeviceStep& st = be->step();
  const DevArray dx = st.alloc(kRows * kCols + 32);  // 32 floats past the rows, which must stay as they are
  st.finish_setup();
  std::vector<float> x = normal(kRows * kCols + 32, 31);
  for (int64_t b = 0; b < kRows * kCols / 32; ++b) {
    for (int64_t j = 0; j < 32; ++j) x[static_cast<size_t>(b * 32 + j)] *= std::exp2(static_cast<float>(b % 5) - 2);
  }
  std::vector<float> got(x.size(), NAN);
  st.upload(x.data(), dx);
  const DevArray r = st.round_for(GgmlType::Q8_0, dx, dx, kRows, kCols);
  EXPECT_EQ(r.offset, dx.offset);
  st.download(dx, got.data());
  st.submit();
  std::vector<float> ref = x;
  for (int64_t row = 0; row < kRows; ++row)
    quant::round_activations_like_ggml(GgmlType::Q8_0, ref.data() + row * kCols, kCols);
  for (size_t j = 0; j < ref.size(); ++j) {
    EXPECT_EQ(std::bit_cast<uint32_t>(got[j]), std::bit_cast<uint32_t>(ref[j]))
        << "element " << j << (j >= static_cast<size_t>(kRows * kCols) ? " (past the rounded rows: untouched)" : "");
  }
  EXPECT_EQ(be->validation_errors(), 0u);
}

TEST(GpuStepRound, ExactRoundingReturnsTheInputItself) {
  auto be = backend(quant::ActivationRounding::exact);
  DeviceStep& st = be->step();
  const DevArray x = st.alloc(512), dst = st.alloc(512);
  st.finish_setup();
  for (const GgmlType t : {GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_K}) {
    const DevArray r = st.round_for(t, x, dst, 2, 256);
    EXPECT_EQ(r.offset, x.offset) << quant::type_name(t);
    EXPECT_EQ(r.size, x.size) << quant::type_name(t);
  }
  EXPECT_EQ(be->validation_errors(), 0u);
}

// --- gather and combine ---

TEST(GpuStepGather, CopiesTheRowsExactly) {
  constexpr int64_t kN = 37, kSrcRows = 10;
  const std::vector<int32_t> rows = {3, 0, 9, 3, 7, 1};
  auto be = backend();
  DeviceStep& st = be->step();
  const DevArray src = st.alloc(kSrcRows * kN), dst = st.alloc(static_cast<int64_t>(rows.size()) * kN);
  const DevArray index = st.alloc(static_cast<int64_t>(rows.size()));
  st.finish_setup();
  const auto x = normal(kSrcRows * kN, 4);
  std::vector<float> got(rows.size() * kN, NAN);
  st.upload(x.data(), src);
  st.gather(src, rows, kN, dst, index);
  st.download(dst, got.data());
  st.submit();
  for (size_t i = 0; i < rows.size(); ++i) {
    for (int64_t j = 0; j < kN; ++j) {
      EXPECT_EQ(got[i * kN + j], x[rows[i] * kN + j]) << "row " << i << " (source row " << rows[i] << ") element " << j;
    }
  }
  EXPECT_EQ(be->validation_errors(), 0u);
}

TEST(GpuStepCombine, SumsTheWeightedSlotsInOrder) {
  auto be = backend();
  DeviceStep& st = be->step();
  struct Case {
    int64_t n_tok, k, n;
    std::vector<float> slots, table;
    DevArray ds, dt, dout;
  };
  std::vector<Case> cases;
  uint32_t seed = 50;
  for (const auto [n_tok, k, n] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 64}, {3, 4, 100}, {7, 8, 257}}) {
    Case c{n_tok, k, n, normal(n_tok * k * n, seed++), {}};
    std::vector<int> perm(static_cast<size_t>(n_tok * k));  // slot rows grouped by expert: any permutation
    for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int>(i);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(seed++));
    const auto w = normal(n_tok * k, seed++);
    for (size_t i = 0; i < perm.size(); ++i) {
      c.table.push_back(static_cast<float>(perm[i]));
      c.table.push_back(w[i]);
    }
    c.ds = st.alloc(n_tok * k * n);
    c.dt = st.alloc(n_tok * k * 2);
    c.dout = st.alloc(n_tok * n);
    cases.push_back(std::move(c));
  }
  st.finish_setup();
  std::vector<std::vector<float>> got;
  for (const Case& c : cases) {
    got.emplace_back(static_cast<size_t>(c.n_tok * c.n), NAN);
    st.upload(c.slots.data(), c.ds);
    st.upload(c.table.data(), c.dt);
    st.combine(c.ds, c.dt, c.dout, c.n_tok, c.k, c.n);
    st.download(c.dout, got.back().data());
  }
  st.submit();
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    int bad = 0;
    for (int64_t t = 0; t < c.n_tok; ++t) {
      for (int64_t i = 0; i < c.n; ++i) {
        float o = 0.0f;
        for (int64_t s = 0; s < c.k; ++s) {
          const size_t e = static_cast<size_t>((t * c.k + s) * 2);
          const float v = c.table[e + 1] * c.slots[static_cast<size_t>(c.table[e]) * c.n + i];
          o = s == 0 ? v : o + v;
        }
        const float g = got[ci][static_cast<size_t>(t * c.n + i)];
        if (g != o && ++bad <= 3) {
          ADD_FAILURE() << "n_tok " << c.n_tok << " k " << c.k << " n " << c.n << " token " << t << " element " << i
                        << ": gpu " << std::hexfloat << g << " host " << o << std::defaultfloat;
        }
      }
    }
    EXPECT_EQ(bad, 0) << "n_tok " << c.n_tok << " k " << c.k;
  }
  EXPECT_EQ(be->validation_errors(), 0u);
}

// --- products ---

struct Matrix {
  std::vector<uint8_t> bytes;
  quant::WeightView view;
};

Matrix random_matrix(GgmlType t, int64_t rows, int64_t cols, uint32_t seed) {
  Matrix m;
  const size_t rb = quant::row_bytes(t, cols);
  m.bytes.resize(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const auto row = normal(cols, seed + static_cast<uint32_t>(r));
    quant::quantize_row_ref(t, row.data(), m.bytes.data() + rb * static_cast<size_t>(r), cols);
  }
  m.view = {t, m.bytes.data(), rows, cols, rb, quant::Memory::host};
  return m;
}

// The summation-order bound of tests/gpu/products_test.cpp for row r, token t of w x (x as both sides multiply
// it: rounded when the products round).
double product_tolerance(const quant::WeightView& w, const float* x_rounded, int64_t r) {
  std::vector<float> wrow(static_cast<size_t>(w.cols));
  quant::dequantize_row(w, r, wrow.data());
  double abs_sum = 0;
  for (int64_t c = 0; c < w.cols; ++c) abs_sum += std::fabs(double{wrow[static_cast<size_t>(c)]} * x_rounded[c]);
  return 2 * (static_cast<double>(w.cols) + 1) * std::ldexp(1.0, -24) * abs_sum;
}

TEST(GpuStepProduct, RoundForThenProductMatchesTheReference) {
  constexpr int64_t kRows = 70, kCols = 512;
  const Matrix q4k = random_matrix(GgmlType::Q4_K, kRows, kCols, 1),
               q80 = random_matrix(GgmlType::Q8_0, kRows, kCols, 2);
  for (const auto rounding : {quant::ActivationRounding::match_ggml, quant::ActivationRounding::exact}) {
    auto be = backend(rounding);
    be->place(q4k.view);
    be->place(q80.view);
    DeviceStep& st = be->step();
    constexpr int64_t kTok = 5;
    const DevArray x = st.alloc(kTok * kCols), xr = st.alloc(kTok * kCols), y = st.alloc(kTok * kRows);
    st.finish_setup();
    for (const Matrix* m : {&q4k, &q80}) {
      for (const int64_t n_tok : {int64_t{1}, kTok}) {
        const auto xs = normal(n_tok * kCols, static_cast<uint32_t>(30 + n_tok));
        std::vector<float> got(static_cast<size_t>(n_tok * kRows), NAN);
        st.upload(xs.data(), x.sub(0, n_tok * kCols));
        const DevArray xin = st.round_for(m->view.type, x, xr, n_tok, kCols);
        st.product(m->view, xin, y, n_tok);
        st.download(y.sub(0, n_tok * kRows), got.data());
        st.submit();
        quant::MatmulScratch scratch(kCols, n_tok, rounding);
        std::vector<float> ref(got.size());
        quant::matmul_reference(m->view, xs.data(), ref.data(), n_tok, scratch);
        std::vector<float> xrh = xs;
        if (rounding == quant::ActivationRounding::match_ggml) {
          for (int64_t t = 0; t < n_tok; ++t)
            quant::round_activations_like_ggml(m->view.type, xrh.data() + t * kCols, kCols);
        }
        int bad = 0;
        for (int64_t t = 0; t < n_tok; ++t) {
          for (int64_t r = 0; r < kRows; ++r) {
            const size_t i = static_cast<size_t>(t * kRows + r);
            const double tol = product_tolerance(m->view, xrh.data() + t * kCols, r);
            if (!(std::fabs(double{got[i]} - ref[i]) <= tol) && ++bad <= 3) {
              ADD_FAILURE() << quant::type_name(m->view.type) << " n_tok " << n_tok << " row " << r << " token " << t
                            << ": gpu " << got[i] << " reference " << ref[i] << " (tolerance " << tol << ")";
            }
          }
        }
      }
    }
    EXPECT_EQ(be->validation_errors(), 0u);
  }
}

// accumulate: the product (both forms) and the combine add into their output, with the bits of an add() of what
// they give without it: the residual adds they replace in the step.
TEST(GpuStepProduct, AccumulateGivesTheBitsOfAnAddedResult) {
  constexpr int64_t kRows = 70, kCols = 512, kTok = 5, kK = 2, kN = 64;
  const Matrix m = random_matrix(GgmlType::Q4_K, kRows, kCols, 8);
  auto be = backend();
  be->place(m.view);
  DeviceStep& st = be->step();
  const DevArray x = st.alloc(kTok * kCols), y = st.alloc(kTok * kRows), y_acc = st.alloc(kTok * kRows);
  const DevArray slots = st.alloc(kTok * kK * kN), table = st.alloc(kTok * kK * 2), out = st.alloc(kTok * kN),
                 out_acc = st.alloc(kTok * kN);
  st.finish_setup();
  const auto xs = normal(kTok * kCols, 60), base = normal(kTok * kRows, 61), s = normal(kTok * kK * kN, 62),
             base_out = normal(kTok * kN, 63);
  std::vector<float> mix;
  for (int64_t i = 0; i < kTok * kK; ++i) mix.insert(mix.end(), {static_cast<float>(kTok * kK - 1 - i), 0.25f + i});
  for (const int64_t n_tok : {int64_t{1}, kTok}) {
    std::vector<float> got(static_cast<size_t>(n_tok * kRows)), got_acc(got.size()), got_out(kTok * kN),
        got_out_acc(got_out.size());
    st.upload(xs.data(), x);
    st.upload(base.data(), y_acc);
    st.upload(s.data(), slots);
    st.upload(mix.data(), table);
    st.upload(base_out.data(), out_acc);
    st.product(m.view, x, y, n_tok);
    st.product(m.view, x, y_acc, n_tok, /*accumulate=*/true);
    st.combine(slots, table, out, kTok, kK, kN);
    st.combine(slots, table, out_acc, kTok, kK, kN, /*accumulate=*/true);
    st.download(y.sub(0, n_tok * kRows), got.data());
    st.download(y_acc.sub(0, n_tok * kRows), got_acc.data());
    st.download(out, got_out.data());
    st.download(out_acc, got_out_acc.data());
    st.submit();
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(std::bit_cast<uint32_t>(got_acc[i]), std::bit_cast<uint32_t>(base[i] + got[i]))
          << "n_tok " << n_tok << " element " << i;
    }
    for (size_t i = 0; i < got_out.size(); ++i) {
      EXPECT_EQ(std::bit_cast<uint32_t>(got_out_acc[i]), std::bit_cast<uint32_t>(base_out[i] + got_out[i]))
          << "combine element " << i;
    }
  }
  EXPECT_EQ(be->validation_errors(), 0u);
}

// A MoE layer's experts as grouped products: two stacks (gates Q4_K, ups Q8_0) of 6 experts, each expert over
// its own token rows (one with none), in one products_grouped call. Each result must be the bits product() gives
// for that expert alone (the same workgroups compute it) and within the summation bound of the reference; with the
// stacks split into 100-row buffers an expert that straddles two runs on its own, with the same bits.
TEST(GpuStepProduct, GroupedExpertsGiveTheBitsOfSingleProducts) {
  constexpr int64_t kExperts = 6, kRows = 40, kCols = 256;
  const Matrix gates = random_matrix(GgmlType::Q4_K, kExperts * kRows, kCols, 41),
               ups = random_matrix(GgmlType::Q8_0, kExperts * kRows, kCols, 42);
  const int64_t n_tok[kExperts] = {3, 0, 1, 5, 2, 1};
  const auto expert = [&](const Matrix& m, int64_t e) {
    quant::WeightView v = m.view;
    v.data = m.view.row(e * kRows);
    v.rows = kRows;
    return v;
  };
  for (const uint64_t split : {uint64_t{0}, uint64_t{100} * quant::row_bytes(GgmlType::Q8_0, kCols)}) {
    auto be = testing::validated_backend(kCols, kExperts * kRows, 8, split, quant::ActivationRounding::exact);
    be->place(gates.view);
    be->place(ups.view);
    DeviceStep& st = be->step();
    std::vector<DevArray> x, y_grouped, y_single;
    for (int64_t e = 0; e < kExperts; ++e) {
      x.push_back(st.alloc(std::max<int64_t>(n_tok[e], 1) * kCols));
      for (int which = 0; which < 2; ++which) {
        y_grouped.push_back(st.alloc(std::max<int64_t>(n_tok[e], 1) * kRows));
        y_single.push_back(st.alloc(std::max<int64_t>(n_tok[e], 1) * kRows));
      }
    }
    const DevArray table = st.alloc(2 * kExperts * 4);
    st.finish_setup();
    std::vector<std::vector<float>> xs;
    std::vector<GroupedProduct> ps;
    for (int64_t e = 0; e < kExperts; ++e) {
      xs.push_back(normal(std::max<int64_t>(n_tok[e], 1) * kCols, static_cast<uint32_t>(50 + e)));
      st.upload(xs.back().data(), x[static_cast<size_t>(e)]);
      for (int which = 0; which < 2; ++which) {
        const quant::WeightView w = expert(which == 0 ? gates : ups, e);
        ps.push_back({w, x[static_cast<size_t>(e)], y_grouped[static_cast<size_t>(2 * e + which)], n_tok[e]});
      }
    }
    const uint64_t dispatches = be->counters().dispatches;
    st.products_grouped(ps, table);
    for (const GroupedProduct& p : ps) {
      const size_t i = static_cast<size_t>(&p - ps.data());
      st.product(p.w, p.x, y_single[i], p.n_tok);
    }
    std::vector<std::vector<float>> got_grouped(ps.size()), got_single(ps.size());
    for (size_t i = 0; i < ps.size(); ++i) {
      const int64_t n = ps[i].n_tok * kRows;
      if (n == 0) continue;
      got_grouped[i].assign(static_cast<size_t>(n), NAN);
      got_single[i].assign(static_cast<size_t>(n), NAN);
      st.download(y_grouped[i].sub(0, n), got_grouped[i].data());
      st.download(y_single[i].sub(0, n), got_single[i].data());
    }
    st.submit();
    if (split == 0) {
      // For the gates and for the ups, one dispatch of the one-token entries and one of the others (matmul.comp's
      // two forms), then one per single product that has tokens.
      EXPECT_EQ(be->counters().dispatches - dispatches, 4u + 2u * 5u);
    }
    for (size_t i = 0; i < ps.size(); ++i) {
      if (ps[i].n_tok == 0) continue;
      EXPECT_EQ(0, std::memcmp(got_grouped[i].data(), got_single[i].data(), got_grouped[i].size() * sizeof(float)))
          << "expert " << i / 2 << (i % 2 == 0 ? " gate" : " up") << " split " << split;
      quant::MatmulScratch scratch(kCols, ps[i].n_tok, quant::ActivationRounding::exact);
      std::vector<float> ref(got_grouped[i].size());
      const std::vector<float>& xi = xs[i / 2];
      quant::matmul_reference(ps[i].w, xi.data(), ref.data(), ps[i].n_tok, scratch);
      for (int64_t t = 0; t < ps[i].n_tok; ++t) {
        for (int64_t r = 0; r < kRows; ++r) {
          const size_t k = static_cast<size_t>(t * kRows + r);
          EXPECT_LE(std::fabs(double{got_grouped[i][k]} - ref[k]), product_tolerance(ps[i].w, xi.data() + t * kCols, r))
              << "expert " << i / 2 << " token " << t << " row " << r;
        }
      }
    }
    EXPECT_EQ(be->validation_errors(), 0u);
  }
}

// The VRAM tier's slots (GpuBackend::reserve_slots): experts copied into slots (write_slots), a gate (Q4_K) and an
// up (Q8_0) part per slot at 256-byte boundaries, the slots split over buffers of two. Their products, grouped and
// single, must give the bits of the same experts' products from the placed stacks (the same kernels over the same
// bytes); a slot rewritten with another expert (a swap) gives that expert's bits; a write outside the slots throws.
TEST(GpuStepProduct, SlotWeightsGiveTheBitsOfPlacedOnes) {
  constexpr int64_t kExperts = 6, kRows = 40, kCols = 256, kSlots = 3, kTok = 3;
  const Matrix gates = random_matrix(GgmlType::Q4_K, kExperts * kRows, kCols, 71),
               ups = random_matrix(GgmlType::Q8_0, kExperts * kRows, kCols, 72);
  const auto expert = [&](const Matrix& m, int64_t e) {
    quant::WeightView v = m.view;
    v.data = m.view.row(e * kRows);
    v.rows = kRows;
    return v;
  };
  const auto round_up = [](uint64_t n) { return (n + 255) / 256 * 256; };
  const uint64_t gate_bytes = kRows * gates.view.row_bytes, up_bytes = kRows * ups.view.row_bytes;
  const uint64_t up_at = round_up(gate_bytes), slot_bytes = up_at + round_up(up_bytes);
  auto be = testing::validated_backend(kCols, kExperts * kRows, 8, 2 * slot_bytes, quant::ActivationRounding::exact);
  be->place(gates.view);
  be->place(ups.view);
  const GgmlType types[] = {GgmlType::Q4_K, GgmlType::Q8_0};
  const uint8_t* base = be->reserve_slots(slot_bytes, kSlots, types);
  EXPECT_EQ(be->slot_bytes_reserved(), kSlots * slot_bytes);
  const auto slot_view = [&](int64_t slot, bool up) {
    quant::WeightView v = up ? expert(ups, 0) : expert(gates, 0);
    v.data = base + static_cast<uint64_t>(slot) * slot_bytes + (up ? up_at : 0);
    return v;
  };
  const auto load = [&](int64_t slot, int64_t e) {
    const GpuBackend::SlotWrite w[] = {{slot_view(slot, false).data, expert(gates, e).data, gate_bytes},
                                       {slot_view(slot, true).data, expert(ups, e).data, up_bytes}};
    be->write_slots(w);
  };
  int64_t in_slot[kSlots] = {5, 0, 3};
  for (int64_t s = 0; s < kSlots; ++s) load(s, in_slot[s]);
  DeviceStep& st = be->step();
  const DevArray x = st.alloc(kTok * kCols), table = st.alloc(4 * 4 * kSlots);
  std::vector<DevArray> y_slot, y_placed;
  for (int64_t i = 0; i < 2 * kSlots; ++i) {
    y_slot.push_back(st.alloc(kTok * kRows));
    y_placed.push_back(st.alloc(kTok * kRows));
  }
  st.finish_setup();
  const auto xs = normal(kTok * kCols, 73);
  for (int round = 0; round < 2; ++round) {
    if (round == 1) {  // a swap: slot 1 now holds expert 2
      load(1, 2);
      in_slot[1] = 2;
    }
    for (const int64_t n_tok : {int64_t{1}, kTok}) {
      st.upload(xs.data(), x);
      std::vector<GroupedProduct> by_slot, placed;
      for (int64_t s = 0; s < kSlots; ++s) {
        for (int up = 0; up < 2; ++up) {
          const size_t i = static_cast<size_t>(2 * s + up);
          by_slot.push_back({slot_view(s, up != 0), x, y_slot[i], n_tok});
          placed.push_back({expert(up != 0 ? ups : gates, in_slot[s]), x, y_placed[i], n_tok});
        }
      }
      st.products_grouped(by_slot, table.sub(0, 4 * 2 * kSlots));
      st.products_grouped(placed, table.sub(4 * 2 * kSlots, 4 * 2 * kSlots));
      std::vector<std::vector<float>> got_slot(by_slot.size()), got_placed(by_slot.size()), got_single(1);
      for (size_t i = 0; i < by_slot.size(); ++i) {
        got_slot[i].assign(static_cast<size_t>(n_tok * kRows), NAN);
        got_placed[i].assign(static_cast<size_t>(n_tok * kRows), NAN);
        st.download(y_slot[i].sub(0, n_tok * kRows), got_slot[i].data());
        st.download(y_placed[i].sub(0, n_tok * kRows), got_placed[i].data());
      }
      st.submit();
      // product() over a slot of the second buffer (slot 2's up).
      got_single[0].assign(static_cast<size_t>(n_tok * kRows), NAN);
      st.product(slot_view(2, true), x, y_slot[0], n_tok);
      st.download(y_slot[0].sub(0, n_tok * kRows), got_single[0].data());
      st.submit();
      for (size_t i = 0; i < by_slot.size(); ++i) {
        EXPECT_EQ(0, std::memcmp(got_slot[i].data(), got_placed[i].data(), got_slot[i].size() * sizeof(float)))
            << "slot " << i / 2 << (i % 2 == 0 ? " gate" : " up") << " round " << round << " n_tok " << n_tok;
      }
      EXPECT_EQ(0, std::memcmp(got_single[0].data(), got_placed[5].data(), got_single[0].size() * sizeof(float)))
          << "product() over slot 2's up, round " << round << " n_tok " << n_tok;
    }
  }
  // A product whose rows leave their slot is not on the GPU; a write outside the slots is refused.
  quant::WeightView tall = slot_view(0, true);
  tall.rows = kRows + 8;
  EXPECT_THROW(st.check_product(tall), Error);
  std::vector<uint8_t> junk(slot_bytes + 16);
  const GpuBackend::SlotWrite outside[] = {{base + slot_bytes - 16, junk.data(), 32}};
  EXPECT_THROW(be->write_slots(outside), Error);
  EXPECT_EQ(be->validation_errors(), 0u);
}

// Slot writes of many megabytes pass through the upload ring's staging pieces (gpu/vulkan/upload_ring.h): one call
// of more bytes than the whole ring holds, pieces reused while earlier ones may still be copying (without the wait
// before a piece's reuse this can fail, when the copy engine falls behind the memcpy), then a call not waited for
// (wait = false), whose copies the very next step submission reads: every slot's products, the last-written slot
// first. (Where the device has a transfer queue of
// its own, that submission's wait on the device orders them; lavapipe has one queue, which orders them anyway.)
// Each write is 2 bytes past a word (rows of 4386 bytes, an odd count of them), so every copy rounds up into the
// slot's padding. Every slot must give the bits of the same rows placed whole (themselves uploaded through the ring,
// waited for tensor by tensor). Under the layer's synchronization validation (where this test makes the process's
// Vulkan instance, as under ctest, one test a process), which reports a copy that a later read is not ordered
// after even where one queue runs both.
TEST(GpuStepProduct, SlotWritesLargerThanTheStagingRingLandWhole) {
  setenv("MOETIER_VULKAN_VALIDATION", "sync", 1);
  constexpr int64_t kExperts = 4, kRows = 1023, kCols = 4128, kSlots = 5, kParts = 2 * kSlots;
  const Matrix ups = random_matrix(GgmlType::Q8_0, kExperts * kRows, kCols, 81);
  const uint64_t expert_bytes = kRows * ups.view.row_bytes;  // ~4.3 MiB, 2 more than a multiple of 4
  ASSERT_EQ(expert_bytes % 4, 2u);
  const uint64_t half_bytes = (expert_bytes + 255) / 256 * 256, slot_bytes = 2 * half_bytes;  // two experts a slot
  ASSERT_GT(kSlots * slot_bytes, gpu::vk_impl::UploadRing::kPieces * gpu::vk_impl::UploadRing::kPieceBytes);
  auto be = testing::validated_backend(kCols, kExperts * kRows, 1);
  be->place(ups.view);
  const GgmlType types[] = {GgmlType::Q8_0};
  const uint8_t* base = be->reserve_slots(slot_bytes, kSlots, types);
  const auto rows_of = [&](int64_t e) { return ups.view.row(e * kRows); };
  const auto view = [&](const uint8_t* data) {
    quant::WeightView v = ups.view;
    v.data = data;
    v.rows = kRows;
    return v;
  };
  // Part p (slot p / 2, half p % 2) holds expert (p + shift) mod kExperts; each fill is one call.
  const auto part = [&](int64_t p) { return base + (p / 2) * slot_bytes + (p % 2) * half_bytes; };
  const auto fill = [&](int64_t shift, bool wait) {
    std::vector<GpuBackend::SlotWrite> w;
    for (int64_t p = 0; p < kParts; ++p) w.push_back({part(p), rows_of((p + shift) % kExperts), expert_bytes});
    be->write_slots(w, wait);
  };
  DeviceStep& st = be->step();
  const DevArray x = st.alloc(kCols);
  std::vector<DevArray> y_slot, y_placed;
  for (int64_t p = 0; p < kParts; ++p) {
    y_slot.push_back(st.alloc(kRows));
    y_placed.push_back(st.alloc(kRows));
  }
  st.finish_setup();
  const auto xs = normal(kCols, 82);
  for (const auto& [shift, wait] : {std::pair<int64_t, bool>{0, true}, std::pair<int64_t, bool>{3, false}}) {
    fill(shift, wait);
    std::vector<std::vector<float>> got_slot(kParts), got_placed(kParts);
    st.upload(xs.data(), x);
    for (int64_t p = kParts - 1; p >= 0; --p) {  // the last-written first: its copies are the latest to land
      const auto i = static_cast<size_t>(p);
      got_slot[i].assign(kRows, NAN);
      got_placed[i].assign(kRows, NAN);
      st.product(view(part(p)), x, y_slot[i], 1);
      st.product(view(rows_of((p + shift) % kExperts)), x, y_placed[i], 1);
      st.download(y_slot[i], got_slot[i].data());
      st.download(y_placed[i], got_placed[i].data());
    }
    st.submit();
    for (int64_t p = 0; p < kParts; ++p) {
      const auto i = static_cast<size_t>(p);
      EXPECT_EQ(0, std::memcmp(got_slot[i].data(), got_placed[i].data(), kRows * sizeof(float)))
          << "slot " << p / 2 << " half " << p % 2 << " shift " << shift << (wait ? " (waited)" : " (not waited)");
    }
  }
  // A call with one write outside the slots is refused whole: none of its writes is queued, so neither does the
  // next call's submission carry them, and part 0 keeps what the last good call wrote there.
  const std::vector<GpuBackend::SlotWrite> bad = {{part(0), rows_of(1), expert_bytes},
                                                  {base + kSlots * slot_bytes - 16, rows_of(2), 32}};
  EXPECT_THROW(be->write_slots(bad), Error);
  const std::vector<GpuBackend::SlotWrite> good = {{part(kParts - 1), rows_of((kParts - 1 + 3) % kExperts),
                                                    expert_bytes}};
  be->write_slots(good);
  std::vector<float> again(kRows, NAN), want(kRows, NAN);
  st.upload(xs.data(), x);
  st.product(view(part(0)), x, y_slot[0], 1);
  st.product(view(rows_of(3 % kExperts)), x, y_placed[0], 1);
  st.download(y_slot[0], again.data());
  st.download(y_placed[0], want.data());
  st.submit();
  EXPECT_EQ(0, std::memcmp(again.data(), want.data(), kRows * sizeof(float)));
  EXPECT_EQ(be->validation_errors(), 0u);
}

// --- one chain in one submission ---

// x -> RMSNorm (gain) -> gate and up products (Q8_0, Q4_K; running together) -> SwiGLU -> + residual, downloaded
// once: each op must see what the one before it wrote. The host runs the same chain; the tolerance carries the
// products' summation-order bound through SwiGLU (|silu'| < 1.1).
TEST(GpuStepChain, OpsInOneSubmissionSeeEachOthersResults) {
  constexpr int64_t kCols = 256, kRows = 96, kTok = 3;
  const Matrix gate = random_matrix(GgmlType::Q8_0, kRows, kCols, 11),
               up = random_matrix(GgmlType::Q4_K, kRows, kCols, 12);
  const auto gain = normal(kCols, 13), x = normal(kTok * kCols, 14, 4.0f), residual = normal(kTok * kRows, 15);
  auto be = backend(quant::ActivationRounding::match_ggml);
  be->place(gate.view);
  be->place(up.view);
  DeviceStep& st = be->step();
  const DevArray dx = st.alloc(kTok * kCols), dn = st.alloc(kTok * kCols), dq8 = st.alloc(kTok * kCols),
                 dq8k = st.alloc(kTok * kCols), dg = st.alloc(kTok * kRows), du = st.alloc(kTok * kRows),
                 dres = st.alloc(kTok * kRows), dgain = st.constant(gain);
  st.finish_setup();
  std::vector<float> got(static_cast<size_t>(kTok * kRows), NAN);
  const uint64_t before = be->counters().submissions;
  st.upload(x.data(), dx);
  st.upload(residual.data(), dres);
  st.rms_norm(dx, dgain, dn, kTok, kCols, 1e-5f);
  const DevArray xg = st.round_for(GgmlType::Q8_0, dn, dq8, kTok, kCols);
  const DevArray xu = st.round_for(GgmlType::Q4_K, dn, dq8k, kTok, kCols);
  st.product(gate.view, xg, dg, kTok);
  st.product(up.view, xu, du, kTok);
  st.glu(GluKind::swiglu, 0.0f, 0.0f, dg, du, dg, kTok * kRows);
  st.add(dres, dg, kTok, kRows, false);
  st.download(dres, got.data());
  st.submit();
  EXPECT_EQ(be->counters().submissions, before + 1);

  std::vector<float> xn(x.size());
  model::rms_norm(x.data(), gain.data(), xn.data(), kTok, kCols, 1e-5f);
  quant::MatmulScratch scratch(kCols, kTok, quant::ActivationRounding::match_ggml);
  std::vector<float> g(static_cast<size_t>(kTok * kRows)), u(g.size()), h(g.size());
  quant::matmul_reference(gate.view, xn.data(), g.data(), kTok, scratch);
  quant::matmul_reference(up.view, xn.data(), u.data(), kTok, scratch);
  model::glu({model::GluConfig::Kind::swiglu}, g.data(), u.data(), h.data(), kTok * kRows);
  std::vector<float> xg_h = xn, xu_h = xn;
  for (int64_t t = 0; t < kTok; ++t) {
    quant::round_activations_like_ggml(GgmlType::Q8_0, xg_h.data() + t * kCols, kCols);
    quant::round_activations_like_ggml(GgmlType::Q4_K, xu_h.data() + t * kCols, kCols);
  }
  int bad = 0;
  for (int64_t t = 0; t < kTok; ++t) {
    for (int64_t r = 0; r < kRows; ++r) {
      const size_t i = static_cast<size_t>(t * kRows + r);
      const double eg = product_tolerance(gate.view, xg_h.data() + t * kCols, r);
      const double eu = product_tolerance(up.view, xu_h.data() + t * kCols, r);
      const double silu = g[i] / (1.0 + std::exp(-double{g[i]}));
      // No allowance for a normalised element that the two RMSNorms put on either side of a grid rounding
      // boundary (a dot then moves by a grid step): rare, and absent with these seeds.
      const double tol = 1.1 * eg * std::fabs(u[i]) + std::fabs(silu) * eu + 1e-5 * std::fabs(h[i]) +
                         1e-6 * std::fabs(double{h[i]} + residual[i]);
      const double ref = double{h[i]} + residual[i];
      if (!(std::fabs(got[i] - ref) <= tol) && ++bad <= 3) {
        ADD_FAILURE() << "token " << t << " row " << r << ": gpu " << got[i] << " host " << ref << " (tolerance " << tol
                      << ")";
      }
    }
  }
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(be->validation_errors(), 0u);
}

// --- errors ---

// submit_async: a product runs while the host goes on; what is recorded next (an upload of another array, an add
// reading both) runs after it and sees its result; its download and the later one land at the next submit().
// The same chain with a plain submit() gives the same bits; several async submissions in a row reuse the command
// buffers only once they finished.
TEST(GpuStepChain, AsyncSubmissionsOrderWithWhatFollows) {
  constexpr int64_t kCols = 256, kRows = 64;
  const Matrix w = random_matrix(GgmlType::Q4_K, kRows, kCols, 21);
  const auto x = normal(kCols, 22), z = normal(kRows, 23);
  auto be = backend();
  be->place(w.view);
  DeviceStep& st = be->step();
  const DevArray dx = st.alloc(kCols), dy = st.alloc(kRows), dz = st.alloc(kRows);
  st.finish_setup();
  const auto chain = [&](bool async, std::vector<float>& y, std::vector<float>& sum) {
    st.upload(x.data(), dx);
    st.product(w.view, dx, dy, 1);
    st.download(dy, y.data());
    if (async) st.submit_async();
    st.upload(z.data(), dz);
    st.add(dz, dy, 1, kRows, false);
    st.download(dz, sum.data());
    st.submit();
  };
  std::vector<float> y_sync(kRows, NAN), sum_sync(kRows, NAN), y_async(kRows, NAN), sum_async(kRows, NAN);
  chain(false, y_sync, sum_sync);
  for (int repeat = 0; repeat < 3; ++repeat) {
    std::fill(y_async.begin(), y_async.end(), NAN);
    std::fill(sum_async.begin(), sum_async.end(), NAN);
    chain(true, y_async, sum_async);
    EXPECT_EQ(0, std::memcmp(y_async.data(), y_sync.data(), y_sync.size() * sizeof(float))) << "repeat " << repeat;
    EXPECT_EQ(0, std::memcmp(sum_async.data(), sum_sync.data(), sum_sync.size() * sizeof(float)))
        << "repeat " << repeat;
  }
  for (size_t i = 0; i < static_cast<size_t>(kRows); ++i) EXPECT_EQ(sum_sync[i], z[i] + y_sync[i]);
  // Two async submissions back to back, then a wait: each product lands.
  std::vector<float> a(kRows, NAN), b(kRows, NAN);
  st.upload(x.data(), dx);
  st.product(w.view, dx, dy, 1);
  st.download(dy, a.data());
  st.submit_async();
  st.product(w.view, dx, dz, 1);
  st.download(dz, b.data());
  st.submit_async();
  st.submit();
  EXPECT_EQ(0, std::memcmp(a.data(), y_sync.data(), a.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(b.data(), y_sync.data(), b.size() * sizeof(float)));
  EXPECT_EQ(be->validation_errors(), 0u);
}

TEST(GpuStepErrors, OversizedKvCacheAndTooSmallArraysThrow) {
  auto be = backend();
  DeviceStep& st = be->step();
  constexpr int64_t kNkv = 256;
  const int64_t too_many = static_cast<int64_t>(be->device().max_storage_buffer_range / (4 * kNkv)) + 1;
  EXPECT_THROW(st.kv_cache(too_many, kNkv), Error);
  const int kv = st.kv_cache(8, 64);
  const DevArray a = st.alloc(100), b = st.alloc(100), small = st.alloc(10);
  st.finish_setup();
  EXPECT_THROW(st.rms_norm(a, DevArray{}, small, 2, 50, 1e-6f), Error);
  EXPECT_THROW(st.rms_norm(a, small, b, 2, 50, 1e-6f), Error);  // gain shorter than a row
  EXPECT_THROW(st.glu(GluKind::swiglu, 0, 0, a, small, b, 100), Error);
  EXPECT_THROW(st.add(small, a, 1, 100, false), Error);
  EXPECT_THROW(st.add(a, small, 5, 20, true), Error);  // a bias row of 20 from 10
  EXPECT_THROW(st.rope(a, small, 2, 1, 50, 50, false), Error);
  EXPECT_THROW(st.kv_store(kv, small, a, 0, 1), Error);
  EXPECT_THROW(st.kv_store(kv, a, b, 8, 1), Error);  // past the cache's 8 positions
  EXPECT_THROW(st.combine(a, small, b, 3, 2, 10), Error);
  EXPECT_THROW(st.gather(a, std::vector<int32_t>{0, 2}, 40, b, small), Error);  // row 2 ends past a
  EXPECT_THROW(st.gather(a, std::vector<int32_t>(20, 0), 4, b, small), Error);   // 20 rows, an index of 10
  const auto v = normal(100, 1);
  EXPECT_THROW(st.upload(v.data(), DevArray{a.offset, 1u << 20}), Error);  // past the arena
  const Matrix unplaced = random_matrix(GgmlType::Q8_0, 4, 32, 1);
  EXPECT_THROW(st.product(unplaced.view, a, b, 1), Error);
  // The step still runs after the refused ops.
  std::vector<float> got(100, NAN);
  st.upload(v.data(), a);
  st.download(a, got.data());
  st.submit();
  EXPECT_EQ(got, v);
  EXPECT_EQ(be->validation_errors(), 0u);
}

}  // namespace
}  // namespace moetier::gpu
