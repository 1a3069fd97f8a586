// Internal: the per-family reference quantizers behind quantize_row_ref (quantize_ref.cpp dispatches).
// Each writes n / block_size blocks; n is checked by the dispatcher.
#pragma once

#include <cstdint>

namespace moetier::quant::detail {

// quantize_legacy.cpp (ports of ggml's quantize_row_*_ref)
void quantize_q4_0(const float* x, void* dst, int64_t n);
void quantize_q4_1(const float* x, void* dst, int64_t n);
void quantize_q5_0(const float* x, void* dst, int64_t n);
void quantize_q5_1(const float* x, void* dst, int64_t n);
void quantize_q8_0(const float* x, void* dst, int64_t n);

// quantize_kquants.cpp (Q8_K a port of ggml's; the weight formats simple, see quantize_ref.h)
void quantize_q2_k(const float* x, void* dst, int64_t n);
void quantize_q3_k(const float* x, void* dst, int64_t n);
void quantize_q4_k(const float* x, void* dst, int64_t n);
void quantize_q5_k(const float* x, void* dst, int64_t n);
void quantize_q6_k(const float* x, void* dst, int64_t n);
void quantize_q8_k(const float* x, void* dst, int64_t n);

// quantize_nonlinear.cpp (IQ4_NL, IQ4_XS simple; MXFP4 a port of ggml's)
void quantize_iq4_nl(const float* x, void* dst, int64_t n);
void quantize_iq4_xs(const float* x, void* dst, int64_t n);
void quantize_mxfp4(const float* x, void* dst, int64_t n);

}  // namespace moetier::quant::detail
