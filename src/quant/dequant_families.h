// Internal: the per-family reference dequantizers behind dequantize_row_ref (dequant_ref.cpp dispatches).
// Each takes a packed row of n elements (n a multiple of the block size, checked by the dispatcher) and writes n
// floats. Layouts and formulas: quant/blocks.h.
#pragma once

#include <cstdint>

namespace moetier::quant::detail {

// dequant_float.cpp
void dequant_f32(const void* src, float* dst, int64_t n);
void dequant_f16(const void* src, float* dst, int64_t n);
void dequant_bf16(const void* src, float* dst, int64_t n);

// dequant_legacy.cpp
void dequant_q4_0(const void* src, float* dst, int64_t n);
void dequant_q4_1(const void* src, float* dst, int64_t n);
void dequant_q5_0(const void* src, float* dst, int64_t n);
void dequant_q5_1(const void* src, float* dst, int64_t n);
void dequant_q8_0(const void* src, float* dst, int64_t n);

// dequant_kquants.cpp
void dequant_q2_k(const void* src, float* dst, int64_t n);
void dequant_q3_k(const void* src, float* dst, int64_t n);
void dequant_q4_k(const void* src, float* dst, int64_t n);
void dequant_q5_k(const void* src, float* dst, int64_t n);
void dequant_q6_k(const void* src, float* dst, int64_t n);
void dequant_q8_k(const void* src, float* dst, int64_t n);

// dequant_iq4.cpp
void dequant_iq4_nl(const void* src, float* dst, int64_t n);
void dequant_iq4_xs(const void* src, float* dst, int64_t n);

// dequant_mxfp4.cpp
void dequant_mxfp4(const void* src, float* dst, int64_t n);

}  // namespace moetier::quant::detail
