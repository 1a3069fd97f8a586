// Hand-built blocks with known codes, for the layouts the oracle files do not exercise (Q4_1, Q5_1, Q8_K) and the
// MXFP4 scale convention at the ends of the E8M0 range. Expected values are written from the format definitions
// (ggml-common.h comments, OCP MX v1.0), not from moetier's code.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "quant/dequant_ref.h"

namespace moetier::quant {
namespace {

void put_u16(std::vector<uint8_t>& b, size_t at, uint16_t v) {
  b[at] = static_cast<uint8_t>(v & 0xff);
  b[at + 1] = static_cast<uint8_t>(v >> 8);
}

TEST(DequantLayout, Q4_1) {
  std::vector<uint8_t> blk(20, 0);
  put_u16(blk, 0, 0x3800);  // d = 0.5
  put_u16(blk, 2, 0xc200);  // m = -3
  for (int j = 0; j < 16; ++j) blk[4 + j] = static_cast<uint8_t>(j | (15 - j) << 4);
  float y[32];
  dequantize_row_ref(GgmlType::Q4_1, blk.data(), y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * static_cast<float>(j) - 3.0f) << j;
    EXPECT_EQ(y[j + 16], 0.5f * static_cast<float>(15 - j) - 3.0f) << j + 16;
  }
}

TEST(DequantLayout, Q5_0AndQ5_1) {
  int code[32];
  for (int j = 0; j < 32; ++j) code[j] = (7 * j + 3) % 32;
  uint32_t qh = 0;
  for (int j = 0; j < 32; ++j) qh |= static_cast<uint32_t>(code[j] >> 4) << j;

  std::vector<uint8_t> b1(24, 0), b0(22, 0);
  put_u16(b1, 0, 0x3400);  // d = 0.25
  put_u16(b1, 2, 0x3c00);  // m = 1
  put_u16(b0, 0, 0x3400);
  for (int k = 0; k < 4; ++k) b1[4 + k] = b0[2 + k] = static_cast<uint8_t>(qh >> (8 * k));
  for (int j = 0; j < 16; ++j)
    b1[8 + j] = b0[6 + j] = static_cast<uint8_t>((code[j] & 15) | (code[j + 16] & 15) << 4);
  float y1[32], y0[32];
  dequantize_row_ref(GgmlType::Q5_1, b1.data(), y1, 32);
  dequantize_row_ref(GgmlType::Q5_0, b0.data(), y0, 32);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(y1[j], 0.25f * static_cast<float>(code[j]) + 1.0f) << j;
    EXPECT_EQ(y0[j], 0.25f * static_cast<float>(code[j] - 16)) << j;
  }
}

TEST(DequantLayout, Q8_K) {
  std::vector<uint8_t> blk(292, 0);
  const float d = 0.125f;
  std::memcpy(blk.data(), &d, 4);
  for (int j = 0; j < 256; ++j) blk[4 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 128));
  std::vector<float> y(256);
  dequantize_row_ref(GgmlType::Q8_K, blk.data(), y.data(), 256);
  for (int j = 0; j < 256; ++j) EXPECT_EQ(y[j], 0.125f * static_cast<float>(j - 128)) << j;
}

TEST(DequantLayout, Mxfp4ScaleIsTwoToTheEMinus127) {
  const double e2m1[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6};
  for (int e : {0, 1, 2, 100, 127, 128, 200, 254}) {
    std::vector<uint8_t> blk(17, 0);
    blk[0] = static_cast<uint8_t>(e);
    for (int j = 0; j < 16; ++j) blk[1 + j] = static_cast<uint8_t>(j | (15 - j) << 4);
    float y[32];
    dequantize_row_ref(GgmlType::MXFP4, blk.data(), y, 32);
    // Exact in float32, except that 3, 4 and 6 * 2^127 (e = 254) exceed FLT_MAX and become infinities.
    const auto expected = [&](double v) {
      const double w = std::ldexp(v, e - 127);
      return std::fabs(w) > std::numeric_limits<float>::max() ? std::copysign(HUGE_VAL, w) : w;
    };
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(static_cast<double>(y[j]), expected(e2m1[j])) << "e " << e << " j " << j;
      EXPECT_EQ(static_cast<double>(y[j + 16]), expected(e2m1[15 - j])) << "e " << e << " j " << j + 16;
    }
  }
}

// Rows start at any byte offset inside a file mapping: dequantization must not assume alignment.
TEST(DequantLayout, UnalignedSource) {
  std::vector<uint8_t> buf(1 + 2 * 210, 0);
  for (size_t i = 1; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i * 37);
  std::vector<uint8_t> aligned(buf.begin() + 1, buf.end());
  std::vector<float> a(512), b(512);
  dequantize_row_ref(GgmlType::Q6_K, buf.data() + 1, a.data(), 512);
  dequantize_row_ref(GgmlType::Q6_K, aligned.data(), b.data(), 512);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);  // bitwise: NaN-safe
}

}  // namespace
}  // namespace moetier::quant
