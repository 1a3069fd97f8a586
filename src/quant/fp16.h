// IEEE 754 binary16 and bfloat16 conversions (exact, scalar). Used by the F16/BF16 dequantizers, the block
// scales of most quant types (stored as binary16) and the F16 KV cache.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace moetier::quant {

// binary16 -> float32, exact for every input including subnormals, inf and NaN.
inline float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + (127 - 15)) << 23 | mant << 13;
  }
  return std::bit_cast<float>(bits);
}

// float32 -> binary16, round to nearest even; overflow gives inf, NaN stays NaN.
inline uint16_t fp32_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (absx < 0x38800000u) {  // result is subnormal or zero in binary16
    // Add the float 0.5 (which aligns the binary16 subnormal ulp to bit 0) and let the FPU round.
    const float r = std::bit_cast<float>(absx) + 0.5f;
    return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(r) - 0x3f000000u));
  }
  const uint32_t mant_odd = (absx >> 13) & 1u;
  uint32_t r = absx + 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
  return static_cast<uint16_t>(sign | (r >> 13));
}

// bfloat16 -> float32 (exact: bf16 is the top half of a float32).
inline float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// float32 -> bfloat16, round to nearest even; NaN stays NaN.
inline uint16_t fp32_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace moetier::quant
