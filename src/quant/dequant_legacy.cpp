// The original ggml block formats, 32 elements per block: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (layouts: quant/blocks.h).
// Formulas as ggml's dequantize_row_q*_0/1 (ggml-quants.c), evaluated in the same order: integer code converted to
// float, times the fp16 scale, plus the fp16 offset where there is one. Bit-exact with ggml.
#include "quant/blocks.h"
#include "quant/dequant_families.h"
#include "quant/fp16.h"

namespace moetier::quant::detail {
namespace {

// The 5th bit of element j of a Q5 block: bit j of the little-endian uint32 qh.
int q5_high_bit(const uint8_t (&qh)[4], int j) { return (qh[j / 8] >> (j % 8)) & 1; }

}  // namespace

void dequant_q4_0(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i) {
    const auto b = load_block<BlockQ4_0>(src, i);
    const float d = fp16_to_fp32(b.d);
    float* y = dst + i * kQK;
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>((b.qs[j] & 0xf) - 8) * d;
      y[j + kQK / 2] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
    }
  }
}

void dequant_q4_1(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i) {
    const auto b = load_block<BlockQ4_1>(src, i);
    const float d = fp16_to_fp32(b.d);
    const float m = fp16_to_fp32(b.m);
    float* y = dst + i * kQK;
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(b.qs[j] & 0xf) * d + m;
      y[j + kQK / 2] = static_cast<float>(b.qs[j] >> 4) * d + m;
    }
  }
}

void dequant_q5_0(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i) {
    const auto b = load_block<BlockQ5_0>(src, i);
    const float d = fp16_to_fp32(b.d);
    float* y = dst + i * kQK;
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (b.qs[j] & 0xf) | q5_high_bit(b.qh, j) << 4;
      const int hi = (b.qs[j] >> 4) | q5_high_bit(b.qh, j + kQK / 2) << 4;
      y[j] = static_cast<float>(lo - 16) * d;
      y[j + kQK / 2] = static_cast<float>(hi - 16) * d;
    }
  }
}

void dequant_q5_1(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i) {
    const auto b = load_block<BlockQ5_1>(src, i);
    const float d = fp16_to_fp32(b.d);
    const float m = fp16_to_fp32(b.m);
    float* y = dst + i * kQK;
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (b.qs[j] & 0xf) | q5_high_bit(b.qh, j) << 4;
      const int hi = (b.qs[j] >> 4) | q5_high_bit(b.qh, j + kQK / 2) << 4;
      y[j] = static_cast<float>(lo) * d + m;
      y[j + kQK / 2] = static_cast<float>(hi) * d + m;
    }
  }
}

void dequant_q8_0(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i) {
    const auto b = load_block<BlockQ8_0>(src, i);
    const float d = fp16_to_fp32(b.d);
    float* y = dst + i * kQK;
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
  }
}

}  // namespace moetier::quant::detail
