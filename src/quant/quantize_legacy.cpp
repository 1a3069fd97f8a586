// Reference quantizers of the 32-element formats, ports of ggml's quantize_row_q{4_0,4_1,5_0,5_1,8_0}_ref
// (ggml-quants.c): one scale from the block's extreme values, then round to nearest. The scale used to quantize
// is the float32 one; the stored fp16 scale may differ from it by half an fp16 ulp (relative 2^-11), as in ggml.
#include <algorithm>
#include <cmath>

#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/quantize_families.h"

namespace moetier::quant::detail {
namespace {

// The element of largest magnitude, with its sign (the first one on ties, as ggml).
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

// Truncation toward zero of a non-negative float, as ggml's (int8_t) casts (operands here are >= 0).
int trunc_nonneg(float v) { return static_cast<int>(v); }

}  // namespace

void quantize_q4_0(const float* x, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    // Map the extreme element to code 0 (value -8 d); the other end saturates at code 15 (7 d).
    const float d = signed_absmax(x, kQK) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ4_0 b{};
    b.d = fp32_to_fp16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, trunc_nonneg(x[j] * id + 8.5f));
      const int q1 = std::min(15, trunc_nonneg(x[j + kQK / 2] * id + 8.5f));
      b.qs[j] = static_cast<uint8_t>(q0 | q1 << 4);
    }
    store_block(dst, i, b);
  }
}

void quantize_q4_1(const float* x, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const auto [lo, hi] = std::minmax_element(x, x + kQK);
    const float min = *lo;
    const float d = (*hi - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ4_1 b{};
    b.d = fp32_to_fp16(d);
    b.m = fp32_to_fp16(min);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, trunc_nonneg((x[j] - min) * id + 0.5f));
      const int q1 = std::min(15, trunc_nonneg((x[j + kQK / 2] - min) * id + 0.5f));
      b.qs[j] = static_cast<uint8_t>(q0 | q1 << 4);
    }
    store_block(dst, i, b);
  }
}

void quantize_q5_0(const float* x, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float d = signed_absmax(x, kQK) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ5_0 b{};
    b.d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(31, trunc_nonneg(x[j] * id + 16.5f));
      const int q1 = std::min(31, trunc_nonneg(x[j + kQK / 2] * id + 16.5f));
      b.qs[j] = static_cast<uint8_t>((q0 & 0xf) | (q1 & 0xf) << 4);
      qh |= static_cast<uint32_t>(q0 >> 4) << j | static_cast<uint32_t>(q1 >> 4) << (j + kQK / 2);
    }
    for (int k = 0; k < 4; ++k) b.qh[k] = static_cast<uint8_t>(qh >> (8 * k));
    store_block(dst, i, b);
  }
}

void quantize_q5_1(const float* x, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const auto [lo, hi] = std::minmax_element(x, x + kQK);
    const float min = *lo;
    const float d = (*hi - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ5_1 b{};
    b.d = fp32_to_fp16(d);
    b.m = fp32_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(31, trunc_nonneg((x[j] - min) * id + 0.5f));
      const int q1 = std::min(31, trunc_nonneg((x[j + kQK / 2] - min) * id + 0.5f));
      b.qs[j] = static_cast<uint8_t>((q0 & 0xf) | (q1 & 0xf) << 4);
      qh |= static_cast<uint32_t>(q0 >> 4) << j | static_cast<uint32_t>(q1 >> 4) << (j + kQK / 2);
    }
    for (int k = 0; k < 4; ++k) b.qh[k] = static_cast<uint8_t>(qh >> (8 * k));
    store_block(dst, i, b);
  }
}

void quantize_q8_0(const float* x, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8_0 b{};
    b.d = fp32_to_fp16(d);
    // roundf: halves away from zero, as ggml. |x * id| <= 127 (up to float rounding, which roundf absorbs).
    for (int j = 0; j < kQK; ++j) b.qs[j] = static_cast<int8_t>(std::round(x[j] * id));
    store_block(dst, i, b);
  }
}

}  // namespace moetier::quant::detail
