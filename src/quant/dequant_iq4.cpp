// The non-linear 4-bit formats IQ4_NL (32-element blocks) and IQ4_XS (256-element super-blocks with 6-bit
// sub-block scales); both index ggml's kvalues_iq4nl grid (layouts: quant/blocks.h). Formulas and evaluation order
// as ggml's dequantize_row_iq4_nl / dequantize_row_iq4_xs. Bit-exact with ggml.
#include "quant/blocks.h"
#include "quant/dequant_families.h"
#include "quant/fp16.h"

namespace moetier::quant::detail {

void dequant_iq4_nl(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i) {
    const auto b = load_block<BlockIQ4_NL>(src, i);
    const float d = fp16_to_fp32(b.d);
    float* y = dst + i * kQK;
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = d * static_cast<float>(kIq4nlValues[b.qs[j] & 0xf]);
      y[j + kQK / 2] = d * static_cast<float>(kIq4nlValues[b.qs[j] >> 4]);
    }
  }
}

void dequant_iq4_xs(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto b = load_block<BlockIQ4_XS>(src, i);
    const float d = fp16_to_fp32(b.d);
    float* y = dst + i * kQK_K;
    for (int s = 0; s < kQK_K / 32; ++s) {
      const int low4 = (b.scales_l[s / 2] >> (4 * (s % 2))) & 0xf;
      const int high2 = (b.scales_h >> (2 * s)) & 3;
      const float dl = d * static_cast<float>((low4 | high2 << 4) - 32);
      const uint8_t* qs = b.qs + 16 * s;
      for (int j = 0; j < 16; ++j) {
        y[32 * s + j] = dl * static_cast<float>(kIq4nlValues[qs[j] & 0xf]);
        y[32 * s + j + 16] = dl * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
      }
    }
  }
}

}  // namespace moetier::quant::detail
