// Reference quantizers: quantize -> dequantize round trips with per-element error bounds derived from each format,
// plus the structural properties ggml's activation quantizers promise (Q8_0, Q8_K).
//
// Inputs: blocks of Gaussian values whose scale varies over six orders of magnitude, plus special blocks (all
// zero, all equal, one outlier, all negative, all positive). Bounds are stated per format below; "ulp slack" is
// 4 float32 ulps of the block's largest magnitude, for the float rounding of the dequantizer's own products.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "quant/blocks.h"
#include "quant/dequant_ref.h"
#include "quant/fp16.h"
#include "quant/kquant_scales.h"
#include "quant/quantize_ref.h"
#include "util/error.h"

namespace moetier::quant {
namespace {

constexpr int64_t kN = 256 * 64;  // 64 super-blocks, 512 legacy blocks

std::vector<float> test_input(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(-4.0f, 2.0f);
  std::vector<float> x(kN);
  for (int64_t b = 0; b < kN / 32; ++b) {
    const float scale = std::pow(10.0f, log_scale(rng));
    float* p = x.data() + 32 * b;
    for (int j = 0; j < 32; ++j) p[j] = scale * gauss(rng);
    switch (b % 16) {
      case 3: std::fill(p, p + 32, 0.0f); break;
      case 5: std::fill(p, p + 32, -scale); break;
      case 7: p[11] = 40.0f * scale; break;  // one outlier
      case 9: for (int j = 0; j < 32; ++j) p[j] = -std::fabs(p[j]); break;
      case 11: for (int j = 0; j < 32; ++j) p[j] = std::fabs(p[j]) + scale; break;
      default: break;
    }
  }
  return x;
}

float absmax(const float* x, int n) {
  float m = 0;
  for (int j = 0; j < n; ++j) m = std::max(m, std::fabs(x[j]));
  return m;
}

float ulp_slack(const float* x, int n) { return 4.0f * std::ldexp(absmax(x, n), -23); }

struct RoundTrip {
  std::vector<uint8_t> packed;
  std::vector<float> y;
};

RoundTrip round_trip(GgmlType t, const std::vector<float>& x) {
  RoundTrip r;
  r.packed.resize(row_bytes(t, kN));
  r.y.resize(kN);
  quantize_row_ref(t, x.data(), r.packed.data(), kN);
  dequantize_row_ref(t, r.packed.data(), r.y.data(), kN);
  return r;
}

// Calls check(block index, first element, bound) and compares |x - y| with the bound for each element.
template <class BoundFn>
void expect_bounded(const std::vector<float>& x, const std::vector<float>& y, int block, BoundFn bound_of,
                    const char* what) {
  int failures = 0;
  for (int64_t b = 0; b < kN / block; ++b) {
    for (int j = 0; j < block; ++j) {
      const int64_t i = b * block + j;
      const double bound = bound_of(b, j);
      const double err = std::fabs(static_cast<double>(x[i]) - y[i]);
      if (!(err <= bound) && ++failures <= 5)
        ADD_FAILURE() << what << " element " << i << ": x " << x[i] << " -> " << y[i] << ", error " << err
                      << " > bound " << bound;
    }
  }
  EXPECT_EQ(failures, 0) << what;
}

class QuantizeRoundTrip : public ::testing::TestWithParam<uint32_t> {};

// Q8_0 (ggml's): d = amax/127 in float32, q = round(x/d), stored d16 = fp16(d). |x - q d16| <= d/2 + 127 |d - d16|.
TEST_P(QuantizeRoundTrip, Q8_0) {
  const auto x = test_input(GetParam());
  const RoundTrip r = round_trip(GgmlType::Q8_0, x);
  expect_bounded(x, r.y, 32, [&](int64_t b, int) {
    const float* p = x.data() + 32 * b;
    const float d = absmax(p, 32) / 127.0f;
    const float d16 = load_block<BlockQ8_0>(r.packed.data(), b).d == 0 ? 0.0f
                      : fp16_to_fp32(load_block<BlockQ8_0>(r.packed.data(), b).d);
    return d / 2 + 127 * std::fabs(d - d16) + ulp_slack(p, 32);
  }, "Q8_0");
  // The largest element of each nonzero block is coded +-127.
  for (int64_t b = 0; b < kN / 32; ++b) {
    const auto blk = load_block<BlockQ8_0>(r.packed.data(), b);
    int qmax = 0;
    for (int8_t q : blk.qs) qmax = std::max(qmax, std::abs(static_cast<int>(q)));
    EXPECT_EQ(qmax, absmax(x.data() + 32 * b, 32) > 0 ? 127 : 0) << "block " << b;
  }
}

// Q8_K (ggml's): float32 d = -max/127, q = round-half-even(x * -127/max) <= 127; error <= |d|/2 (d is exact float).
// bsums are the sums of each 16 codes.
TEST_P(QuantizeRoundTrip, Q8_K) {
  const auto x = test_input(GetParam());
  const RoundTrip r = round_trip(GgmlType::Q8_K, x);
  expect_bounded(x, r.y, 256, [&](int64_t b, int) {
    const auto blk = load_block<BlockQ8_K>(r.packed.data(), b);
    return std::fabs(blk.d) / 2 * (1 + 1e-6) + ulp_slack(x.data() + 256 * b, 256);
  }, "Q8_K");
  for (int64_t b = 0; b < kN / 256; ++b) {
    const auto blk = load_block<BlockQ8_K>(r.packed.data(), b);
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += blk.qs[16 * g + l];
      EXPECT_EQ(blk.bsums[g], sum);
    }
    for (int8_t q : blk.qs) EXPECT_GE(q, -127);  // -127/max scaling never produces -128
  }
}

// Q4_0 / Q5_0 (ggml's): d = max / -2^(b-1) for the signed extreme; codes 0..2^b-1. Rounding error <= |d|/2, but the
// end opposite the extreme saturates one step short: bound |d|, plus the fp16 scale error (2^(b-1) |d - d16|).
TEST_P(QuantizeRoundTrip, Q4_0AndQ5_0) {
  const auto x = test_input(GetParam());
  for (const auto& [t, half_levels] : {std::pair{GgmlType::Q4_0, 8.0f}, std::pair{GgmlType::Q5_0, 16.0f}}) {
    const RoundTrip r = round_trip(t, x);
    expect_bounded(x, r.y, 32, [&, hl = half_levels, tt = t](int64_t b, int) {
      const float* p = x.data() + 32 * b;
      const float d = absmax(p, 32) / hl;
      uint16_t h;
      std::memcpy(&h, r.packed.data() + static_cast<size_t>(b) * traits(tt).type_size, 2);
      return d + hl * std::fabs(d - std::fabs(fp16_to_fp32(h))) + ulp_slack(p, 32);
    }, std::string(type_name(t)).c_str());
  }
}

// Q4_1 / Q5_1 (ggml's): d = (max - min) / (2^b - 1), m = min. Error <= d/2 + (2^b - 1) |d - d16| + |m - m16|.
TEST_P(QuantizeRoundTrip, Q4_1AndQ5_1) {
  const auto x = test_input(GetParam());
  for (const auto& [t, levels] : {std::pair{GgmlType::Q4_1, 15.0f}, std::pair{GgmlType::Q5_1, 31.0f}}) {
    const RoundTrip r = round_trip(t, x);
    expect_bounded(x, r.y, 32, [&, lv = levels, tt = t](int64_t b, int) {
      const float* p = x.data() + 32 * b;
      const auto [lo, hi] = std::minmax_element(p, p + 32);
      const float d = (*hi - *lo) / lv;
      uint16_t h[2];
      std::memcpy(h, r.packed.data() + static_cast<size_t>(b) * traits(tt).type_size, 4);
      return d / 2 + lv * std::fabs(d - fp16_to_fp32(h[0])) + std::fabs(*lo - fp16_to_fp32(h[1])) +
             ulp_slack(p, 32);
    }, std::string(type_name(t)).c_str());
  }
}

// The simple K quantizers round every scale up, so each element is within half its sub-block's step
// (step = d * sc, decoded from the block) of its value. The step itself must be close to the ideal
// range / levels: at most one super-block scale unit above what the sub-block needs.
struct KGeometry {
  GgmlType type;
  int sub;       // elements per sub-block
  float levels;  // qmax: the largest code (asymmetric) or largest positive code (symmetric)
};

std::vector<float> decoded_steps(GgmlType t, const uint8_t* row, int64_t b) {
  std::vector<float> steps;
  switch (t) {
    case GgmlType::Q2_K: {
      const auto k = load_block<BlockQ2_K>(row, b);
      for (int s = 0; s < 16; ++s) steps.push_back(fp16_to_fp32(k.d) * static_cast<float>(k.scales[s] & 0xf));
      break;
    }
    case GgmlType::Q3_K: {
      const auto k = load_block<BlockQ3_K>(row, b);
      for (int s = 0; s < 16; ++s)
        steps.push_back(std::fabs(fp16_to_fp32(k.d) * static_cast<float>(detail::q3_k_scale6(s, k.scales) - 32)));
      break;
    }
    case GgmlType::Q4_K: {
      const auto k = load_block<BlockQ4_K>(row, b);
      for (int s = 0; s < 8; ++s)
        steps.push_back(fp16_to_fp32(k.d) * static_cast<float>(detail::get_scale_min_k4(s, k.scales).scale));
      break;
    }
    case GgmlType::Q5_K: {
      const auto k = load_block<BlockQ5_K>(row, b);
      for (int s = 0; s < 8; ++s)
        steps.push_back(fp16_to_fp32(k.d) * static_cast<float>(detail::get_scale_min_k4(s, k.scales).scale));
      break;
    }
    case GgmlType::Q6_K: {
      const auto k = load_block<BlockQ6_K>(row, b);
      for (int s = 0; s < 16; ++s) steps.push_back(std::fabs(fp16_to_fp32(k.d) * static_cast<float>(k.scales[s])));
      break;
    }
    default: ADD_FAILURE() << "not a K type";
  }
  return steps;
}

TEST_P(QuantizeRoundTrip, KQuantsWithinHalfAStep) {
  const auto x = test_input(GetParam());
  for (const KGeometry g : {KGeometry{GgmlType::Q2_K, 16, 3}, KGeometry{GgmlType::Q3_K, 16, 3},
                            KGeometry{GgmlType::Q4_K, 32, 15}, KGeometry{GgmlType::Q5_K, 32, 31},
                            KGeometry{GgmlType::Q6_K, 16, 31}}) {
    SCOPED_TRACE(type_name(g.type));
    const RoundTrip r = round_trip(g.type, x);
    std::vector<std::vector<float>> steps(kN / 256);
    for (int64_t b = 0; b < kN / 256; ++b) steps[b] = decoded_steps(g.type, r.packed.data(), b);
    expect_bounded(x, r.y, 256, [&](int64_t b, int j) {
      return steps[b][j / g.sub] / 2 * (1 + 1e-5) + ulp_slack(x.data() + 256 * b, 256);
    }, std::string(type_name(g.type)).c_str());
    // Steps are not wastefully coarse: the sub-block's own need (range / qmax for the asymmetric formats,
    // amax / qmax for the symmetric ones) plus one unit of the super-block scale (amax of the block / qmax / 15 for
    // 4-bit sub-scales, / 31 for Q3_K, / 63 for 6-bit, / 127 for Q6_K), with 1% for fp16 rounding.
    for (int64_t b = 0; b < kN / 256; ++b) {
      const float* p = x.data() + 256 * b;
      const float smax = g.type == GgmlType::Q2_K ? 15.f : g.type == GgmlType::Q3_K ? 31.f
                         : g.type == GgmlType::Q6_K ? 127.f : 63.f;
      const bool symmetric = g.type == GgmlType::Q3_K || g.type == GgmlType::Q6_K;
      // A sub-block of an asymmetric format needs (max + |min(0, lo)| + one min unit) / qmax.
      const float unit = 2.0f * absmax(p, 256) / g.levels / smax * 1.01f;
      for (size_t s = 0; s < steps[b].size(); ++s) {
        const float* q = p + s * g.sub;
        const auto [lo, hi] = std::minmax_element(q, q + g.sub);
        const float need = symmetric ? absmax(q, g.sub) / g.levels : (*hi - std::min(0.0f, *lo)) / g.levels;
        EXPECT_LE(steps[b][s], need * 1.01f + unit + absmax(p, 256) / smax * 1.01f * (symmetric ? 0 : 1) / g.levels)
            << "super-block " << b << " sub-block " << s;
      }
    }
  }
}

// MXFP4 (ggml's): e = floor(log2 amax) - 2 + 127, nearest E2M1 code. With u = 2^(e-127), representable magnitudes
// are {0, .5, 1, 1.5, 2, 3, 4, 6} u: inside [-6u, 6u] the error is at most half the widest gap (2u / 2 = u); above,
// values saturate to +-6u (amax < 8u, so by less than 2u).
TEST_P(QuantizeRoundTrip, Mxfp4) {
  const auto x = test_input(GetParam());
  const RoundTrip r = round_trip(GgmlType::MXFP4, x);
  expect_bounded(x, r.y, 32, [&](int64_t b, int j) {
    const auto blk = load_block<BlockMXFP4>(r.packed.data(), b);
    const float u = std::ldexp(1.0f, blk.e - 127);
    const float ax = std::fabs(x[32 * b + j]);
    EXPECT_LT(absmax(x.data() + 32 * b, 32), 8 * u);
    return ax <= 6 * u ? u : ax - 6 * u + 1e-6f * ax;
  }, "MXFP4");
}

// IQ4_NL / IQ4_XS (simple): the extreme maps to -127 steps; the grid's widest gap is 24 steps (89 -> 113), and the
// far end saturates at 113 for values up to 127 steps: error <= 14 steps (1% for the fp16 scale rounding).
TEST_P(QuantizeRoundTrip, Iq4) {
  const auto x = test_input(GetParam());
  const RoundTrip nl = round_trip(GgmlType::IQ4_NL, x);
  expect_bounded(x, nl.y, 32, [&](int64_t b, int) {
    return 14 * absmax(x.data() + 32 * b, 32) / 127 * 1.01f + ulp_slack(x.data() + 32 * b, 32);
  }, "IQ4_NL");
  const RoundTrip xs = round_trip(GgmlType::IQ4_XS, x);
  expect_bounded(x, xs.y, 256, [&](int64_t b, int j) {
    const auto blk = load_block<BlockIQ4_XS>(xs.packed.data(), b);
    const int s = j / 32;
    const int ls = (((blk.scales_l[s / 2] >> (4 * (s % 2))) & 0xf) | ((blk.scales_h >> (2 * s)) & 3) << 4) - 32;
    return 14 * std::fabs(fp16_to_fp32(blk.d) * static_cast<float>(ls)) * 1.001f + ulp_slack(x.data() + 256 * b, 256);
  }, "IQ4_XS");
}

INSTANTIATE_TEST_SUITE_P(Seeds, QuantizeRoundTrip, ::testing::Values(1u, 2u, 3u));

TEST(QuantizeRef, FloatTypesRoundTrip) {
  const auto x = test_input(7);
  EXPECT_EQ(round_trip(GgmlType::F32, x).y, x);
  const auto h = round_trip(GgmlType::F16, x).y;
  const auto b = round_trip(GgmlType::BF16, x).y;
  for (int64_t i = 0; i < kN; ++i) {
    EXPECT_EQ(h[i], fp16_to_fp32(fp32_to_fp16(x[i])));
    EXPECT_EQ(b[i], bf16_to_fp32(fp32_to_bf16(x[i])));
  }
}

TEST(QuantizeRef, RefusesTypesWithoutAQuantizer) {
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> out(1024);
  EXPECT_FALSE(can_quantize_ref(GgmlType::IQ2_XXS));
  EXPECT_TRUE(can_quantize_ref(GgmlType::Q4_K));
  try {
    quantize_row_ref(GgmlType::IQ2_XXS, x.data(), out.data(), 256);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("IQ2_XXS"), std::string::npos) << e.what();
  }
  EXPECT_THROW(quantize_row_ref(GgmlType::Q4_K, x.data(), out.data(), 128), Error);
}

}  // namespace
}  // namespace moetier::quant

namespace moetier::quant {
namespace {

// The kernels' all-at-once unpacking of the Q4_K / Q5_K 6-bit scales gives get_scale_min_k4's values, for every
// bit of the 12 packed bytes (each byte set to each value in turn, over random backgrounds).
TEST(KQuantScales, UnpackAllMatchesPerSubBlock) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int pos = 0; pos < 12; ++pos) {
    for (int v = 0; v < 256; ++v) {
      uint8_t q[12];
      for (auto& b : q) b = static_cast<uint8_t>(byte(rng));
      q[pos] = static_cast<uint8_t>(v);
      uint8_t scale[8], min[8];
      detail::unpack_scale_min_k4(q, scale, min);
      for (int j = 0; j < 8; ++j) {
        const detail::ScaleMin sm = detail::get_scale_min_k4(j, q);
        ASSERT_EQ(scale[j], sm.scale) << "byte " << pos << " = " << v << ", sub-block " << j;
        ASSERT_EQ(min[j], sm.min) << "byte " << pos << " = " << v << ", sub-block " << j;
      }
    }
  }
}

}  // namespace
}  // namespace moetier::quant
