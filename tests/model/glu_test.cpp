// The vectorised GLU activations and soft-cap (quant/kernels/glu_kernels.cpp) against the formulas of glu.h evaluated
// with std::exp and std::tanh.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "model/glu.h"
#include "quant/kernels/glu_kernels.h"

namespace moetier::model {
namespace {

float reference(const GluConfig& cfg, float gate, float up) {
  if (cfg.kind == GluConfig::Kind::swiglu) return gate / (1.0f + std::exp(-gate)) * up;
  if (cfg.kind == GluConfig::Kind::geglu) {
    using quant::kernels::kGeluCoefA, quant::kernels::kSqrt2OverPi;
    const float x = gate;
    return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kGeluCoefA * x * x))) * up;
  }
  const float g = std::min(gate, cfg.limit);
  const float u = std::clamp(up, -cfg.limit, cfg.limit);
  return g / (1.0f + std::exp(-cfg.alpha * g)) * (u + 1.0f);
}

constexpr GluConfig kKinds[] = {GluConfig{}, GluConfig{.kind = GluConfig::Kind::swiglu_oai},
                                GluConfig{.kind = GluConfig::Kind::geglu}};

// Inputs from tiny to far past exp's float range (|x| > 88.7), both signs, and the edges themselves.
std::vector<float> inputs(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> log_mag(-30.0f, 8.0f);
  std::vector<float> v(n);
  for (float& x : v) x = (rng() & 1 ? 1.0f : -1.0f) * std::exp(log_mag(rng));
  const float edges[] = {0.0f, -0.0f, 88.0f, -88.0f, 88.8f, -88.8f, 103.9f, -104.5f, 1e30f, -1e30f, 7.0f, -7.0f};
  for (size_t i = 0; i < std::size(edges) && i < n; ++i) v[i] = edges[i];
  return v;
}

// Error allowed: the reference's own rounding (division, products, std::exp's < 1 ULP) plus hn::Exp's 1 ULP,
// carried through 1 / (1 + e) and the products: 8 ULP of the result, relative, with an absolute floor at the
// smallest normal float where the result underflows. GEGLU adds 1 + tanh, whose error (hn::Tanh's 4 ULP and
// std::tanh's 1, of a value near 1) is absolute and survives the cancellation where tanh is near -1 (negative
// gates): there 8 ULP of 1 more, times x up / 2. The measured worst case is printed.
TEST(Glu, MatchesTheFormulaWithStdExpAndTanh) {
  for (const GluConfig cfg : kKinds) {
    const std::vector<float> gate = inputs(4099, 1), up = inputs(4099, 2);
    std::vector<float> h(gate.size());
    glu(cfg, gate.data(), up.data(), h.data(), static_cast<int64_t>(h.size()));
    double worst = 0;
    for (size_t i = 0; i < h.size(); ++i) {
      const float want = reference(cfg, gate[i], up[i]);
      ASSERT_FALSE(std::isnan(h[i])) << "element " << i << ": gate " << gate[i] << ", up " << up[i];
      if (std::isinf(want)) {
        EXPECT_EQ(h[i], want) << "element " << i << ": gate " << gate[i] << ", up " << up[i];
        continue;
      }
      const double eps = std::numeric_limits<float>::epsilon();
      // in double: |gate up| passes float's range at the edge inputs
      const double cancel = cfg.kind == GluConfig::Kind::geglu && gate[i] < 0
                                ? 8 * eps * 0.5 * std::fabs(double{gate[i]} * double{up[i]})
                                : 0.0;
      const double tol = std::max(8 * eps * std::fabs(want) + cancel, double{std::numeric_limits<float>::min()});
      EXPECT_NEAR(h[i], want, tol) << "element " << i << ": gate " << gate[i] << ", up " << up[i];
      // GEGLU's error measured against |want| + |x up| / 2, the scale its tolerance takes
      const double scale = std::fabs(want) + (cancel > 0 ? cancel / (8 * eps) : 0.0);
      if (scale != 0) worst = std::max(worst, std::fabs(double{h[i]} - want) / scale);
    }
    std::printf("glu kind %d: worst error %.3g (%.2f ULP) of the tolerance's scale\n", static_cast<int>(cfg.kind),
                worst, worst / std::numeric_limits<float>::epsilon());
  }
}

// An element's result is the same whether it sits in a whole vector or in the padded tail, and in place.
TEST(Glu, ResultDoesNotDependOnPositionOrLength) {
  for (const GluConfig cfg : kKinds) {
    const std::vector<float> gate = inputs(37, 3), up = inputs(37, 4);
    std::vector<float> all(gate.size());
    glu(cfg, gate.data(), up.data(), all.data(), static_cast<int64_t>(all.size()));
    for (size_t i = 0; i < gate.size(); ++i) {
      float one = 0;
      glu(cfg, &gate[i], &up[i], &one, 1);
      EXPECT_EQ(std::memcmp(&one, &all[i], sizeof(float)), 0) << "kind " << static_cast<int>(cfg.kind) << ", element "
                                                              << i;
    }
    std::vector<float> in_place = gate;
    glu(cfg, in_place.data(), up.data(), in_place.data(), static_cast<int64_t>(in_place.size()));
    EXPECT_EQ(std::memcmp(in_place.data(), all.data(), sizeof(float) * all.size()), 0);
  }
}

// The soft-cap against cap * std::tanh(v * (1 / cap)): hn::Tanh's 4 ULP, std::tanh's 1 and the two products' 8
// ULP of the result at most, relative (floor: the smallest normal float); no result beyond the cap, and an
// element's result independent of its position.
TEST(Glu, SoftCapMatchesTheFormulaWithStdTanh) {
  constexpr float kCap = 30.0f;
  const std::vector<float> in = inputs(4099, 5);
  std::vector<float> v = in;
  quant::kernels::soft_cap(v.data(), static_cast<int64_t>(v.size()), kCap);
  double worst = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const float want = std::tanh(in[i] * (1.0f / kCap)) * kCap;
    const float tol = std::max(8 * std::numeric_limits<float>::epsilon() * std::fabs(want),
                               std::numeric_limits<float>::min());
    EXPECT_NEAR(v[i], want, tol) << "element " << i << ": " << in[i];
    EXPECT_LE(std::fabs(v[i]), kCap) << "element " << i << ": " << in[i];
    if (want != 0) worst = std::max(worst, std::fabs(double{v[i]} - want) / std::fabs(want));
    float one = in[i];
    quant::kernels::soft_cap(&one, 1, kCap);
    EXPECT_EQ(std::memcmp(&one, &v[i], sizeof(float)), 0) << "element " << i;
  }
  std::printf("soft_cap: worst relative error %.3g (%.2f ULP)\n", worst, worst / std::numeric_limits<float>::epsilon());
}

}  // namespace
}  // namespace moetier::model
