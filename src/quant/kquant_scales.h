// Internal: unpacking the 6-bit sub-block scales shared by several K formats (layouts: quant/blocks.h).
#pragma once

#include <cstdint>
#include <cstring>

namespace moetier::quant::detail {

// Scale and min of sub-block j (0..7) of Q4_K / Q5_K, from the 12 packed bytes q (ggml's get_scale_min_k4).
// Bytes 0-3 hold scales 0-3 in their low 6 bits, bytes 4-7 mins 0-3 likewise; scales/mins 4-7 keep their low
// 4 bits in the nibbles of bytes 8-11 (scale low, min high) and their top 2 bits in the spare top 2 bits of
// bytes 0-3 (scales) and 4-7 (mins).
struct ScaleMin {
  uint8_t scale;
  uint8_t min;
};
inline ScaleMin get_scale_min_k4(int j, const uint8_t* q) {
  if (j < 4) return {static_cast<uint8_t>(q[j] & 63), static_cast<uint8_t>(q[j + 4] & 63)};
  return {static_cast<uint8_t>((q[j + 4] & 0xf) | (q[j - 4] >> 6) << 4),
          static_cast<uint8_t>((q[j + 4] >> 4) | (q[j] >> 6) << 4)};
}

// All eight scales and mins of a Q4_K / Q5_K block at once, the same values as get_scale_min_k4(0..7) (tested),
// with four 32-bit operations per group of four instead of byte-wise work (the kernels' per-block setup).
inline void unpack_scale_min_k4(const uint8_t* q, uint8_t (&scale)[8], uint8_t (&min)[8]) {
  uint32_t u[3];
  std::memcpy(u, q, 12);
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  const uint32_t s03 = u[0] & kLow6;                                      // scales 0-3: bytes 0-3, low 6 bits
  const uint32_t m03 = u[1] & kLow6;                                      // mins 0-3: bytes 4-7, low 6 bits
  const uint32_t s47 = (u[2] & kLow4) | ((u[0] >> 6) & kLow2) << 4;       // low nibbles of 8-11, top bits of 0-3
  const uint32_t m47 = ((u[2] >> 4) & kLow4) | ((u[1] >> 6) & kLow2) << 4;  // high nibbles of 8-11, top of 4-7
  std::memcpy(scale, &s03, 4);
  std::memcpy(scale + 4, &s47, 4);
  std::memcpy(min, &m03, 4);
  std::memcpy(min + 4, &m47, 4);
}

// The inverse, for the reference quantizers: pack eight 6-bit scales and mins (each 0..63) into 12 bytes.
inline void set_scale_min_k4(const uint8_t (&scale)[8], const uint8_t (&min)[8], uint8_t* q) {
  for (int j = 0; j < 4; ++j) {
    q[j] = static_cast<uint8_t>((scale[j] & 63) | (scale[j + 4] >> 4) << 6);
    q[j + 4] = static_cast<uint8_t>((min[j] & 63) | (min[j + 4] >> 4) << 6);
    q[j + 8] = static_cast<uint8_t>((scale[j + 4] & 0xf) | (min[j + 4] & 0xf) << 4);
  }
}

// The 6-bit scale (0..63, stored with +32 bias) of sub-block s (0..15) of Q3_K, from its 12 packed bytes.
inline int q3_k_scale6(int s, const uint8_t* q) {
  const int low4 = s < 8 ? (q[s] & 0xf) : (q[s - 8] >> 4);
  const int high2 = (q[8 + s % 4] >> (2 * (s / 4))) & 3;
  return low4 | high2 << 4;
}

}  // namespace moetier::quant::detail
