// Reference quantizers of the table-based 4-bit formats.
//  * MXFP4 is a port of ggml's quantize_row_mxfp4_ref: shared exponent e = floor(log2(amax)) - 2 + 127 (so the
//    largest element lands in [4, 8) * 2^(e-127), E2M1's top binade; values above 6 * 2^(e-127) saturate, as in
//    the OCP MX v1.0 reference conversion), then the nearest E2M1 code. Differences from ggml: floor(log2) comes
//    from frexp (exact; log2f can round up just below a power of two), and e is clamped to [0, 254] where ggml's
//    float-to-uint8 cast would overflow.
//  * IQ4_NL and IQ4_XS use the simple scheme of quantize_ref.h: the element of largest magnitude maps to the grid's
//    end -127, every element goes to the nearest grid value under the stored (fp16-rounded) scale.
#include <algorithm>
#include <cmath>

#include "quant/blocks.h"
#include "quant/e8m0.h"
#include "quant/fp16.h"
#include "quant/quantize_families.h"

namespace moetier::quant::detail {
namespace {

// Index of the table entry t[k] whose value step * t[k] is nearest to x (first on ties).
int nearest_code(float x, float step, const int8_t (&table)[16]) {
  int best = 0;
  float best_err = std::fabs(step * static_cast<float>(table[0]) - x);
  for (int k = 1; k < 16; ++k) {
    const float err = std::fabs(step * static_cast<float>(table[k]) - x);
    if (err < best_err) {
      best = k;
      best_err = err;
    }
  }
  return best;
}

float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// Nibbles of a 32-element group in the Q4_0 order (element j low nibble of qs[j], element j+16 high nibble).
void pack_nibbles(const int (&codes)[kQK], uint8_t* qs) {
  for (int j = 0; j < kQK / 2; ++j) qs[j] = static_cast<uint8_t>(codes[j] | codes[j + kQK / 2] << 4);
}

}  // namespace

void quantize_iq4_nl(const float* x, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    BlockIQ4_NL b{};
    b.d = fp32_to_fp16(signed_absmax(x, kQK) / static_cast<float>(kIq4nlValues[0]));
    const float d = fp16_to_fp32(b.d);
    int codes[kQK];
    for (int j = 0; j < kQK; ++j) codes[j] = nearest_code(x[j], d, kIq4nlValues);
    pack_nibbles(codes, b.qs);
    store_block(dst, i, b);
  }
}

void quantize_iq4_xs(const float* x, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    // Per sub-block, the signed scale that maps its extreme element to -127; then a shared fp16 d (rounded up so
    // that |scale| / d <= 31) and integer sub-scales rounded away from zero (so no element is pushed off the grid
    // by more than the grid's own asymmetry).
    float want[8];
    float max_abs = 0.0f;
    for (int s = 0; s < 8; ++s) {
      want[s] = signed_absmax(x + 32 * s, 32) / static_cast<float>(kIq4nlValues[0]);
      max_abs = std::max(max_abs, std::fabs(want[s]));
    }
    BlockIQ4_XS b{};
    uint16_t dh = fp32_to_fp16(max_abs / 31.0f);
    if (fp16_to_fp32(dh) < max_abs / 31.0f) ++dh;
    b.d = dh;
    const float d = fp16_to_fp32(dh);
    for (int s = 0; s < 8; ++s) {
      int ls = 0;
      if (d > 0.0f) {
        ls = std::min(31, static_cast<int>(std::ceil(std::fabs(want[s]) / d)));
        if (want[s] < 0.0f) ls = -ls;
      }
      const int stored = ls + 32;  // 1..63
      b.scales_l[s / 2] |= static_cast<uint8_t>((stored & 0xf) << (4 * (s % 2)));
      b.scales_h = static_cast<uint16_t>(b.scales_h | (stored >> 4) << (2 * s));
      const float dl = d * static_cast<float>(ls);
      int codes[kQK];
      for (int j = 0; j < kQK; ++j) codes[j] = nearest_code(x[32 * s + j], dl, kIq4nlValues);
      pack_nibbles(codes, b.qs + 16 * s);
    }
    store_block(dst, i, b);
  }
}

void quantize_mxfp4(const float* x, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    BlockMXFP4 b{};
    if (amax > 0.0f) {
      int exp2 = 0;
      std::frexp(amax, &exp2);  // amax = m * 2^exp2 with m in [0.5, 1): floor(log2(amax)) = exp2 - 1
      b.e = static_cast<uint8_t>(std::clamp(exp2 - 1 - 2 + 127, 0, 254));
    }
    const float d = e8m0_to_fp32_half(b.e);
    int codes[kQK];
    for (int j = 0; j < kQK; ++j) codes[j] = nearest_code(x[j], d, kMxfp4DoubledValues);
    pack_nibbles(codes, b.qs);
    store_block(dst, i, b);
  }
}

}  // namespace moetier::quant::detail
