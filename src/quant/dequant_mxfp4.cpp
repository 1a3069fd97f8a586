// MXFP4 (OCP MX v1.0: 32 E2M1 elements sharing one E8M0 exponent), in the GGUF layout of gpt-oss (quant/blocks.h).
// value = doubled_E2M1(nibble) * 2^(e - 128), as ggml's dequantize_row_mxfp4; both factors and the product are exact
// in float32 (a small integer times a power of two), so this equals E2M1(nibble) * 2^(e - 127) bit for bit.
#include "quant/blocks.h"
#include "quant/dequant_families.h"
#include "quant/e8m0.h"

namespace moetier::quant::detail {

void dequant_mxfp4(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i) {
    const auto b = load_block<BlockMXFP4>(src, i);
    const float d = e8m0_to_fp32_half(b.e);
    float* y = dst + i * kQK;
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(kMxfp4DoubledValues[b.qs[j] & 0xf]) * d;
      y[j + kQK / 2] = static_cast<float>(kMxfp4DoubledValues[b.qs[j] >> 4]) * d;
    }
  }
}

}  // namespace moetier::quant::detail
