// Dispatch of the scalar reference dequantizers by type; the formulas live in one file per family.
#include "quant/dequant_ref.h"

#include "quant/dequant_families.h"
#include "util/error.h"

namespace moetier::quant {

void dequantize_row_ref(GgmlType t, const void* src, float* dst, int64_t n) {
  using namespace detail;
  void (*fn)(const void*, float*, int64_t) = nullptr;
  switch (t) {
    case GgmlType::F32: fn = dequant_f32; break;
    case GgmlType::F16: fn = dequant_f16; break;
    case GgmlType::BF16: fn = dequant_bf16; break;
    case GgmlType::Q4_0: fn = dequant_q4_0; break;
    case GgmlType::Q4_1: fn = dequant_q4_1; break;
    case GgmlType::Q5_0: fn = dequant_q5_0; break;
    case GgmlType::Q5_1: fn = dequant_q5_1; break;
    case GgmlType::Q8_0: fn = dequant_q8_0; break;
    case GgmlType::Q2_K: fn = dequant_q2_k; break;
    case GgmlType::Q3_K: fn = dequant_q3_k; break;
    case GgmlType::Q4_K: fn = dequant_q4_k; break;
    case GgmlType::Q5_K: fn = dequant_q5_k; break;
    case GgmlType::Q6_K: fn = dequant_q6_k; break;
    case GgmlType::Q8_K: fn = dequant_q8_k; break;
    case GgmlType::IQ4_NL: fn = dequant_iq4_nl; break;
    case GgmlType::IQ4_XS: fn = dequant_iq4_xs; break;
    case GgmlType::MXFP4: fn = dequant_mxfp4; break;
    default: break;
  }
  // The traits table's can_dequantize flag must agree with this switch (tested in tests/quant).
  if (fn == nullptr) {
    if (find_type(static_cast<uint32_t>(t)))
      fail("{} is not supported yet: moetier cannot compute tensors of this type", type_name(t));
    fail("ggml type id {} is unknown: moetier cannot compute tensors of this type", static_cast<uint32_t>(t));
  }
  const int64_t block = traits(t).block_size;
  if (n < 0 || n % block != 0)
    fail("cannot dequantize {} elements of {}: not a whole number of {}-element blocks", n, type_name(t), block);
  fn(src, dst, n);
}

}  // namespace moetier::quant
