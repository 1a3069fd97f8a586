// fp16 / bf16 conversions against independent computations: every binary16 and bfloat16 bit pattern is decoded
// with ldexp from its fields, and the float -> half direction is checked for round trips and ties-to-even.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

#include "quant/fp16.h"

namespace moetier::quant {
namespace {

// binary16 from its fields: sign, 5-bit exponent (bias 15), 10-bit mantissa; subnormals at exponent 0.
double fp16_reference(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0) v = std::ldexp(mant, -24);
  else if (exp == 31) v = mant == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  else v = std::ldexp(1024 + mant, exp - 25);
  return sign ? -v : v;
}

TEST(Fp16, DecodesEveryBitPatternLikeLdexp) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float got = fp16_to_fp32(h);
    const double want = fp16_reference(h);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "fp16 0x" << std::hex << i;
      // The payload is kept (shifted into the top of the float mantissa) and the sign too.
      EXPECT_EQ(std::bit_cast<uint32_t>(got) >> 31, i >> 15);
      EXPECT_EQ(std::bit_cast<uint32_t>(got) & 0x7fffffu, (i & 0x3ffu) << 13);
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << "fp16 0x" << std::hex << i;
      ASSERT_EQ(std::signbit(got), (i >> 15) != 0) << "fp16 0x" << std::hex << i;
    }
  }
}

TEST(Fp16, EveryNonNanValueRoundTrips) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    if (std::isnan(fp16_to_fp32(h))) {
      EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(fp16_to_fp32(h))))) << std::hex << i;
      continue;
    }
    ASSERT_EQ(fp32_to_fp16(fp16_to_fp32(h)), h) << "fp16 0x" << std::hex << i;
  }
}

// For each pair of adjacent finite binary16 values (same sign) the float32 midpoint, and the floats just below and
// above it (midpoints are exact in float32: 11 significant bits + 1). Ties go to the even mantissa.
TEST(Fp16, RoundsToNearestEvenAtEveryMidpoint) {
  for (uint32_t sign = 0; sign < 2; ++sign) {
    for (uint32_t m = 0; m < 0x7bff; ++m) {  // m and m+1 both finite, m+1 <= 0x7bff (65504)
      const auto lo = static_cast<uint16_t>(sign << 15 | m);
      const auto hi = static_cast<uint16_t>(sign << 15 | (m + 1));
      const double mid_d = (fp16_reference(lo) + fp16_reference(hi)) / 2;
      const auto mid = static_cast<float>(mid_d);
      ASSERT_EQ(static_cast<double>(mid), mid_d);
      const uint16_t even = (m & 1) == 0 ? lo : hi;
      ASSERT_EQ(fp32_to_fp16(mid), even) << "midpoint " << mid_d;
      const float toward_lo = std::nextafter(mid, sign ? std::numeric_limits<float>::infinity() : 0.0f);
      const float toward_hi = std::nextafter(mid, sign ? -std::numeric_limits<float>::infinity()
                                                       : std::numeric_limits<float>::infinity());
      ASSERT_EQ(fp32_to_fp16(toward_lo), lo) << "just inside " << mid_d;
      ASSERT_EQ(fp32_to_fp16(toward_hi), hi) << "just outside " << mid_d;
    }
  }
}

TEST(Fp16, OverflowUnderflowAndSpecials) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(std::nextafter(65520.0f, 0.0f)), 0x7bff);  // below the midpoint to 2^16
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);  // tie between 65504 (odd mantissa) and 2^16: to infinity
  EXPECT_EQ(fp32_to_fp16(1e10f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-1e10f), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(inf), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-inf), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // half the smallest subnormal: tie to even (0)
  EXPECT_EQ(fp32_to_fp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp: tie to even (2)
  EXPECT_EQ(fp32_to_fp16(1e-30f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::denorm_min()), 0x0000);
  const uint16_t nan = fp32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
}

// bfloat16: sign, 8-bit exponent (bias 127), 7-bit mantissa.
double bf16_reference(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 7) & 0xff, mant = h & 0x7f;
  double v;
  if (exp == 0) v = std::ldexp(mant, -133);
  else if (exp == 255) v = mant == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  else v = std::ldexp(128 + mant, exp - 134);
  return sign ? -v : v;
}

TEST(Bf16, DecodesEveryBitPatternAndRoundTrips) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float got = bf16_to_fp32(h);
    const double want = bf16_reference(h);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got));
      ASSERT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(got))));
      continue;
    }
    ASSERT_EQ(static_cast<double>(got), want) << "bf16 0x" << std::hex << i;
    ASSERT_EQ(fp32_to_bf16(got), h) << "bf16 0x" << std::hex << i;
  }
}

TEST(Bf16, RoundsToNearestEvenAtEveryMidpoint) {
  for (uint32_t sign = 0; sign < 2; ++sign) {
    for (uint32_t m = 0; m < 0x7f7f; ++m) {  // m and m+1 finite
      const auto lo = static_cast<uint16_t>(sign << 15 | m);
      const auto hi = static_cast<uint16_t>(sign << 15 | (m + 1));
      // The midpoint is the float with lo's bits and 0x8000 in the low half; neighbours are +-1 in the bits.
      const uint32_t mid_bits = static_cast<uint32_t>(lo) << 16 | 0x8000u;
      const uint16_t even = (m & 1) == 0 ? lo : hi;
      ASSERT_EQ(fp32_to_bf16(std::bit_cast<float>(mid_bits)), even) << std::hex << mid_bits;
      ASSERT_EQ(fp32_to_bf16(std::bit_cast<float>(mid_bits - 1)), lo) << std::hex << mid_bits;
      ASSERT_EQ(fp32_to_bf16(std::bit_cast<float>(mid_bits + 1)), hi) << std::hex << mid_bits;
    }
  }
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to +inf
  const uint16_t nan = fp32_to_bf16(std::bit_cast<float>(0x7f800001u));  // payload only in the dropped bits
  EXPECT_TRUE(std::isnan(bf16_to_fp32(nan))) << "a NaN must not truncate to infinity";
}

}  // namespace
}  // namespace moetier::quant
