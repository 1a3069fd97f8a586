// The vectorised GLU activations (quant/kernels/glu_kernels.cpp) against the formulas of glu.h evaluated with std::exp.
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

namespace moetier::model {
namespace {

float reference(const GluConfig& cfg, float gate, float up) {
  if (cfg.kind == GluConfig::Kind::swiglu) return gate / (1.0f + std::exp(-gate)) * up;
  const float g = std::min(gate, cfg.limit);
  const float u = std::clamp(up, -cfg.limit, cfg.limit);
  return g / (1.0f + std::exp(-cfg.alpha * g)) * (u + 1.0f);
}

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
// smallest normal float where the result underflows. The measured worst case is printed.
TEST(Glu, MatchesTheFormulaWithStdExp) {
  for (const GluConfig cfg : {GluConfig{}, GluConfig{.kind = GluConfig::Kind::swiglu_oai}}) {
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
      const float tol = std::max(8 * std::numeric_limits<float>::epsilon() * std::fabs(want),
                                 std::numeric_limits<float>::min());
      EXPECT_NEAR(h[i], want, tol) << "element " << i << ": gate " << gate[i] << ", up " << up[i];
      if (want != 0) worst = std::max(worst, std::fabs(double{h[i]} - want) / std::fabs(want));
    }
    std::printf("glu kind %d: worst relative error %.3g (%.2f ULP)\n", static_cast<int>(cfg.kind), worst,
                worst / std::numeric_limits<float>::epsilon());
  }
}

// An element's result is the same whether it sits in a whole vector or in the padded tail, and in place.
TEST(Glu, ResultDoesNotDependOnPositionOrLength) {
  const GluConfig cfg{};
  const std::vector<float> gate = inputs(37, 3), up = inputs(37, 4);
  std::vector<float> all(gate.size());
  glu(cfg, gate.data(), up.data(), all.data(), static_cast<int64_t>(all.size()));
  for (size_t i = 0; i < gate.size(); ++i) {
    float one = 0;
    glu(cfg, &gate[i], &up[i], &one, 1);
    EXPECT_EQ(std::memcmp(&one, &all[i], sizeof(float)), 0) << "element " << i;
  }
  std::vector<float> in_place = gate;
  glu(cfg, in_place.data(), up.data(), in_place.data(), static_cast<int64_t>(in_place.size()));
  EXPECT_EQ(std::memcmp(in_place.data(), all.data(), sizeof(float) * all.size()), 0);
}

}  // namespace
}  // namespace moetier::model
