// Float element types: F32 (copied), F16 (IEEE binary16) and BF16 (top half of a float32). Exact conversions.
#include <cstring>

#include "quant/dequant_families.h"
#include "quant/fp16.h"

namespace moetier::quant::detail {

void dequant_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void dequant_f16(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);  // memcpy: the row may start at any byte offset
    dst[i] = fp16_to_fp32(h);
  }
}

void dequant_bf16(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    dst[i] = bf16_to_fp32(h);
  }
}

}  // namespace moetier::quant::detail
