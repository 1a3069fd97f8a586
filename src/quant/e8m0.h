// E8M0 scales of the OCP Microscaling Formats (MX) v1.0: an unsigned 8-bit biased exponent, value 2^(e - 127)
// (e = 255 is NaN in the spec; ggml, and so moetier, do not special-case it).
#pragma once

#include <bit>
#include <cstdint>

namespace moetier::quant {

// 2^(e - 128): half the E8M0 value, the scale ggml pairs with its doubled E2M1 table (kMxfp4DoubledValues).
// Exact for every e: e = 0 and 1 give the float32 subnormals 2^-128 and 2^-127 (bit 21 and bit 22 of the
// mantissa); from e = 2 on the result is a normal float with biased exponent e - 1.
constexpr float e8m0_to_fp32_half(uint8_t e) {
  const uint32_t bits = e < 2 ? (uint32_t{1} << 21) << e : static_cast<uint32_t>(e - 1) << 23;
  return std::bit_cast<float>(bits);
}

}  // namespace moetier::quant
