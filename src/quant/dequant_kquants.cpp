// The K formats: 256-element super-blocks with quantized sub-block scales (layouts: quant/blocks.h).
// Formulas as ggml's dequantize_row_q{2..6}_K (ggml-quants.c), evaluated in the same order: the float sub-block
// scale d * sc (and min dmin * m) is formed first, then multiplied by the integer code. Bit-exact with ggml.
#include "quant/blocks.h"
#include "quant/dequant_families.h"
#include "quant/fp16.h"
#include "quant/kquant_scales.h"

namespace moetier::quant::detail {

void dequant_q2_k(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto b = load_block<BlockQ2_K>(src, i);
    const float d = fp16_to_fp32(b.d);
    const float dmin = fp16_to_fp32(b.dmin);
    float* y = dst + i * kQK_K;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q = b.qs + 32 * half;
      for (int k = 0; k < 4; ++k) {      // bit pair 2k of q[] holds elements 32k .. 32k+32 of this half
        for (int g = 0; g < 2; ++g) {    // two sub-blocks of 16 per bit pair
          const uint8_t sc = b.scales[8 * half + 2 * k + g];
          const float dl = d * static_cast<float>(sc & 0xf);
          const float ml = dmin * static_cast<float>(sc >> 4);
          for (int l = 16 * g; l < 16 * g + 16; ++l)
            *y++ = dl * static_cast<float>((q[l] >> (2 * k)) & 3) - ml;
        }
      }
    }
  }
}

void dequant_q3_k(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto b = load_block<BlockQ3_K>(src, i);
    const float d = fp16_to_fp32(b.d);
    float* y = dst + i * kQK_K;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q = b.qs + 32 * half;
      for (int k = 0; k < 4; ++k) {
        const int hbit = 4 * half + k;  // bit of hmask[l] holding the third bit of these 32 elements
        for (int g = 0; g < 2; ++g) {
          const float dl = d * static_cast<float>(q3_k_scale6(8 * half + 2 * k + g, b.scales) - 32);
          for (int l = 16 * g; l < 16 * g + 16; ++l) {
            const int q3 = ((q[l] >> (2 * k)) & 3) - (((b.hmask[l] >> hbit) & 1) ? 0 : 4);
            *y++ = dl * static_cast<float>(q3);
          }
        }
      }
    }
  }
}

void dequant_q4_k(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto b = load_block<BlockQ4_K>(src, i);
    const float d = fp16_to_fp32(b.d);
    const float dmin = fp16_to_fp32(b.dmin);
    float* y = dst + i * kQK_K;
    for (int s = 0; s < 8; ++s) {
      const ScaleMin sm = get_scale_min_k4(s, b.scales);
      const float ds = d * static_cast<float>(sm.scale);
      const float ms = dmin * static_cast<float>(sm.min);
      const uint8_t* q = b.qs + 32 * (s / 2);
      const int shift = 4 * (s % 2);  // even sub-blocks in the low nibbles, odd in the high
      for (int l = 0; l < 32; ++l) *y++ = ds * static_cast<float>((q[l] >> shift) & 0xf) - ms;
    }
  }
}

void dequant_q5_k(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto b = load_block<BlockQ5_K>(src, i);
    const float d = fp16_to_fp32(b.d);
    const float dmin = fp16_to_fp32(b.dmin);
    float* y = dst + i * kQK_K;
    for (int s = 0; s < 8; ++s) {
      const ScaleMin sm = get_scale_min_k4(s, b.scales);
      const float ds = d * static_cast<float>(sm.scale);
      const float ms = dmin * static_cast<float>(sm.min);
      const uint8_t* q = b.qs + 32 * (s / 2);
      const int shift = 4 * (s % 2);
      for (int l = 0; l < 32; ++l) {
        const int q5 = ((q[l] >> shift) & 0xf) | ((b.qh[l] >> s) & 1) << 4;
        *y++ = ds * static_cast<float>(q5) - ms;
      }
    }
  }
}

void dequant_q6_k(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto b = load_block<BlockQ6_K>(src, i);
    const float d = fp16_to_fp32(b.d);
    float* y = dst + i * kQK_K;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = b.ql + 64 * half;
      const uint8_t* qh = b.qh + 32 * half;
      const int8_t* sc = b.scales + 8 * half;
      // Quarter r (elements 32r .. 32r+32 of this half): low nibbles of ql[0..32) and ql[32..64), then the high
      // nibbles of each; top two bits at bits 2r of qh[l].
      for (int r = 0; r < 4; ++r) {
        const uint8_t* lo = ql + 32 * (r % 2);
        const int lo_shift = 4 * (r / 2);
        for (int l = 0; l < 32; ++l) {
          const int q6 = ((lo[l] >> lo_shift) & 0xf) | ((qh[l] >> (2 * r)) & 3) << 4;
          const float ds = d * static_cast<float>(sc[2 * r + l / 16]);
          y[32 * r + l] = ds * static_cast<float>(q6 - 32);
        }
      }
      y += 128;
    }
  }
}

void dequant_q8_k(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto b = load_block<BlockQ8_K>(src, i);
    float* y = dst + i * kQK_K;
    for (int j = 0; j < kQK_K; ++j) y[j] = b.d * static_cast<float>(b.qs[j]);
  }
}

}  // namespace moetier::quant::detail
