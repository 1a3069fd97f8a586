// Dispatch of the reference quantizers by type; the formulas live in quantize_{legacy,kquants,nonlinear}.cpp.
#include "quant/quantize_ref.h"

#include <cstring>

#include "quant/fp16.h"
#include "quant/quantize_families.h"
#include "util/error.h"

namespace moetier::quant {
namespace {

using QuantizeFn = void (*)(const float*, void*, int64_t);

void quantize_f32(const float* x, void* dst, int64_t n) {
  std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
}
void quantize_f16(const float* x, void* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = fp32_to_fp16(x[i]);
    std::memcpy(static_cast<uint8_t*>(dst) + 2 * i, &h, 2);
  }
}
void quantize_bf16(const float* x, void* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = fp32_to_bf16(x[i]);
    std::memcpy(static_cast<uint8_t*>(dst) + 2 * i, &h, 2);
  }
}

QuantizeFn quantizer(GgmlType t) {
  using namespace detail;
  switch (t) {
    case GgmlType::F32: return quantize_f32;
    case GgmlType::F16: return quantize_f16;
    case GgmlType::BF16: return quantize_bf16;
    case GgmlType::Q4_0: return quantize_q4_0;
    case GgmlType::Q4_1: return quantize_q4_1;
    case GgmlType::Q5_0: return quantize_q5_0;
    case GgmlType::Q5_1: return quantize_q5_1;
    case GgmlType::Q8_0: return quantize_q8_0;
    case GgmlType::Q2_K: return quantize_q2_k;
    case GgmlType::Q3_K: return quantize_q3_k;
    case GgmlType::Q4_K: return quantize_q4_k;
    case GgmlType::Q5_K: return quantize_q5_k;
    case GgmlType::Q6_K: return quantize_q6_k;
    case GgmlType::Q8_K: return quantize_q8_k;
    case GgmlType::IQ4_NL: return quantize_iq4_nl;
    case GgmlType::IQ4_XS: return quantize_iq4_xs;
    case GgmlType::MXFP4: return quantize_mxfp4;
    default: return nullptr;
  }
}

}  // namespace

bool can_quantize_ref(GgmlType t) { return quantizer(t) != nullptr; }

void quantize_row_ref(GgmlType t, const float* src, void* dst, int64_t n) {
  const QuantizeFn fn = quantizer(t);
  if (fn == nullptr) {
    if (find_type(static_cast<uint32_t>(t)))
      fail("quantizing to {} is not supported: moetier has no reference quantizer for this type", type_name(t));
    fail("ggml type id {} is unknown: moetier cannot quantize to it", static_cast<uint32_t>(t));
  }
  const int64_t block = traits(t).block_size;
  if (n < 0 || n % block != 0)
    fail("cannot quantize {} elements to {}: not a whole number of {}-element blocks", n, type_name(t), block);
  fn(src, dst, n);
}

}  // namespace moetier::quant
